// Packed-UE8M0 scale-factor layouts (the SM100 scale format, plain layout kernels that run
// on any GPU): fp32 scales become their 8-bit exponents, four consecutive K blocks per
// int32 (K block 4p + j in byte j, i.e. bits [8j, 8j + 8)), MN-major.
//
//   byte(v) = (bits(v) >> 23) & 0xff   (the biased exponent; sign and mantissa are dropped:
//                                        the callers pass powers of two, +0.0 gives 0)
//
// Both kernels read every input through its strides and write every output word they own
// (zeros where no scale lands), so the output buffer is fully defined. They never read or
// write outside [0, sf rows) x [0, mn) of the input and the output extent they are given,
// whatever the values of the layouts they read on the device (psum / grouped_layout).
#pragma once

#include <deep_gemm/common/stdint.cuh>

namespace deep_gemm {

namespace sf_pack {

constexpr uint32_t kThreads = 256;          // blockDim.x of both kernels (1-D blocks)
constexpr uint32_t kWordsPerThread = 8;     // mn-major kernel: packed columns per grid.y step
constexpr uint32_t kColumnsPerThread = 4;   // k-grouped kernel: columns per thread (strided by kThreads)

__device__ __forceinline__ uint32_t ue8m0_byte(float v) { return (__float_as_uint(v) >> 23) & 0xffu; }

// Rounds x >= 0 up to a multiple of a >= 1.
__device__ __forceinline__ int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

}  // namespace sf_pack

// [groups, mn, sf_k] fp32 (any strides) -> words out[(g * packed_k + p) * out_ld + i],
// packed_k = ceil(sf_k / 4), out_ld = align(mn, 4): word (g, p, i) packs sf[g, i, 4p + j]
// for j < 4 with 4p + j < sf_k (higher bytes 0). Rows i in [mn, out_ld) (TMA padding) are 0.
//
// psum (nullptr: none; only with groups == 1): num_psum int32 cumulative row ends. Row i is
// converted only when some group g holds it: start_g <= i < end_g, with end_g = max(psum[g], 0),
// start_0 = 0, start_g = align(end_{g-1}, m_alignment). Other rows (gaps between groups, whose
// scales may be uninitialised memory) are neither read nor packed: their words are 0.
//
// Launch: block kThreads (x); grid.x = ceil(out_ld / kThreads) (one row per thread),
// grid.y = any >= 1 (grid-stride over chunks of kWordsPerThread packed columns), grid.z =
// any >= 1 (grid-stride over groups). No shared memory, no barrier.
__device__ __forceinline__ void pack_ue8m0_mn_major_impl(const float* in, uint32_t* out, uint32_t groups,
                                                         uint32_t mn, uint32_t sf_k, uint32_t packed_k,
                                                         int64_t stride_g, int64_t stride_mn, int64_t stride_k,
                                                         uint32_t out_ld, const int* psum, uint32_t num_psum,
                                                         uint32_t m_alignment) {
    using namespace sf_pack;
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= out_ld) return;

    bool valid = i < mn;
    if (valid && psum != nullptr) {
        // Whether any group holds row i (every thread scans the table: all lanes of a warp
        // load the same entry, one broadcast per group).
        bool held = false;
        int64_t prev_end = 0;
        for (uint32_t g = 0; g < num_psum; ++g) {
            const int v = __ldg(psum + g);
            const int64_t end = v > 0 ? int64_t(v) : 0;
            const int64_t start = g == 0 ? 0 : align_up(prev_end, m_alignment);
            held |= int64_t(i) >= start && int64_t(i) < end;
            prev_end = end;
        }
        valid = held;
    }

    const uint32_t num_chunks = (packed_k + kWordsPerThread - 1) / kWordsPerThread;
    for (uint32_t g = blockIdx.z; g < groups; g += gridDim.z) {
        const float* src = in + int64_t(g) * stride_g + int64_t(i) * stride_mn;
        uint32_t* dst = out + uint64_t(g) * packed_k * out_ld + i;
        for (uint32_t c = blockIdx.y; c < num_chunks; c += gridDim.y) {
            const uint32_t p_end = min(packed_k, (c + 1) * kWordsPerThread);
            for (uint32_t p = c * kWordsPerThread; p < p_end; ++p) {
                uint32_t word = 0;
                if (valid) {
                    #pragma unroll
                    for (uint32_t j = 0; j < 4; ++j) {
                        const uint32_t k = 4 * p + j;
                        if (k < sf_k) word |= ue8m0_byte(__ldg(src + int64_t(k) * stride_k)) << (8 * j);
                    }
                }
                dst[uint64_t(p) * out_ld] = word;  // consecutive threads: consecutive rows
            }
        }
    }
}

// K-grouped scales, [sf_rows, mn] fp32 (any strides; row r = one K block of one group, the
// groups back to back: group g's n_g rows start at row S_g = n_0 + ... + n_{g-1}) -> words
// out[p * mn + i] for p < packed_rows: group g's packed rows start at P_g = sum_{h<g}
// ceil(n_h / 4); its packed row P_g + q packs rows S_g + 4q + j (j < 4, 4q + j < n_g; higher
// bytes 0), so each group's K blocks are padded to a multiple of 4 on their own. Packed rows
// past the last group's are 0; input rows >= sf_rows read as 0 (an inconsistent layout
// gives wrong words, never an access out of bounds).
//
// Group sizes, from layout (num_groups int32, read on the device):
//   psum == false: k_g = max(layout[g], 0)                       (the K size of group g)
//   psum == true:  e_g = max(layout[g], 0), k_g = max(e_g - start_g, 0), start_0 = 0,
//                  start_g = align(e_{g-1}, k_alignment)          (cumulative K ends)
//   n_g = ceil(k_g / gran_k)
//
// Launch: block kThreads (x); grid.x = ceil(mn / (kThreads * kColumnsPerThread)), grid.y =
// any >= 1 (grid-stride over packed rows). Per packed row, the block reads the layout in
// chunks of kThreads entries into shared memory and thread 0 finds the owning group (so
// every thread of the block reaches every barrier: the loops are uniform per block).
__device__ __forceinline__ void pack_ue8m0_k_grouped_impl(const float* in, uint32_t* out, uint32_t mn,
                                                          uint32_t sf_rows, uint32_t packed_rows, int64_t stride_k,
                                                          int64_t stride_mn, const int* layout, uint32_t num_groups,
                                                          uint32_t gran_k, uint32_t k_alignment, bool psum) {
    using namespace sf_pack;
    __shared__ int chunk[kThreads];
    __shared__ int64_t s_base;   // input row of byte 0 of this packed row
    __shared__ uint32_t s_count; // bytes that come from the input (0..4)
    __shared__ uint32_t s_found; // the owning group was found (ends the scan)
    const uint32_t tid = threadIdx.x;

    for (uint32_t p = blockIdx.y; p < packed_rows; p += gridDim.y) {
        // Scan state (thread 0 only): running S_g, P_g and e_{g-1}.
        int64_t sf_start = 0, packed_start = 0, prev_end = 0;
        if (tid == 0) {
            s_base = 0;
            s_count = 0;
            s_found = 0;
        }
        for (uint32_t g0 = 0; g0 < num_groups; g0 += kThreads) {
            __syncthreads();  // s_found (and, from the second chunk on, chunk[]) settled
            if (s_found) break;  // uniform: every thread reads the same value
            if (g0 + tid < num_groups) chunk[tid] = __ldg(layout + g0 + tid);
            __syncthreads();
            if (tid == 0) {
                const uint32_t n_here = min(kThreads, num_groups - g0);
                for (uint32_t t = 0; t < n_here; ++t) {
                    const int v = chunk[t];
                    const int64_t e = v > 0 ? int64_t(v) : 0;
                    int64_t k = e;
                    if (psum) {
                        const int64_t start = g0 + t == 0 ? 0 : align_up(prev_end, k_alignment);
                        k = e > start ? e - start : 0;
                        prev_end = e;
                    }
                    const int64_t n = (k + gran_k - 1) / gran_k;
                    const int64_t np = (n + 3) / 4;
                    if (int64_t(p) < packed_start + np) {
                        const int64_t q = int64_t(p) - packed_start;
                        const int64_t left = n - 4 * q;
                        s_base = sf_start + 4 * q;
                        s_count = left < 4 ? uint32_t(left) : 4u;
                        s_found = 1;
                        break;
                    }
                    sf_start += n;
                    packed_start += np;
                }
            }
        }
        __syncthreads();  // s_base / s_count final
        const int64_t base = s_base;
        const uint32_t count = s_count;
        __syncthreads();  // everyone has read them before thread 0 resets them (next p)

        uint32_t* dst = out + uint64_t(p) * mn;
        for (uint32_t s = 0; s < kColumnsPerThread; ++s) {
            const uint32_t i = (blockIdx.x * kColumnsPerThread + s) * kThreads + tid;
            if (i >= mn) break;
            uint32_t word = 0;
            #pragma unroll
            for (uint32_t j = 0; j < 4; ++j) {
                const int64_t r = base + j;
                if (j < count && r < int64_t(sf_rows))
                    word |= ue8m0_byte(__ldg(in + r * stride_k + int64_t(i) * stride_mn)) << (8 * j);
            }
            dst[i] = word;  // consecutive threads: consecutive columns
        }
    }
}

}  // namespace deep_gemm
