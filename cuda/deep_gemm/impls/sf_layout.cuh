// Scale-factor layout kernel: any-strided fp32 scales [groups, mn, kb] into the
// MN-major, TMA-aligned layout the GEMMs load ([groups, kb, align(mn, 4)]).
// One block of 32 x 8 threads per tile of 32 rows x 32 k-blocks of one group.
// Writes are coalesced along mn; the pad rows get zeros so the buffer is
// fully defined (unless valid_rows cuts a group short, see below).
#pragma once

#include <deep_gemm/common/stdint.cuh>

namespace deep_gemm {

constexpr uint32_t kSfTile = 32;       // rows (mn) and k-blocks per block; blockDim.x
constexpr uint32_t kSfTileRows = 8;    // blockDim.y
constexpr uint32_t kSfPerThread = kSfTile / kSfTileRows;  // elements each thread moves

// valid_rows (nullptr: every row): per group, the rows the consumer uses. When
// valid_rows[g] < mn, rows i >= max(valid_rows[g], 0) of group g, pad rows
// included, are neither read nor written: they keep whatever the fresh buffer
// held (otherwise the group is converted in full). The masked GEMM passes
// masked_m here: it loads whole tiles of rows, but never stores the results of
// rows >= masked_m, and each row's scale only reaches that row's results, so
// the garbage there is harmless (and masked_m is never read on the host).
// zero_word (nullptr: none): one int32 this kernel sets to 0 for the GEMM launched after
// it (the m-grouped GEMMs' tile-claim counter), which then needs no fill of its own.
__device__ __forceinline__ void mn_major_sf_impl(const float* in, float* out, uint32_t mn, uint32_t kb,
                                                 int64_t stride_g, int64_t stride_mn, int64_t stride_k,
                                                 uint32_t out_ld, const int* valid_rows, int* zero_word) {
    // The GEMM launched right after this kernel (with programmatic dependent launch) may
    // start its setup now; it waits for this grid's writes before reading them.
    asm volatile("griddepcontrol.launch_dependents;");
    if (zero_word != nullptr && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x == 0 &&
        threadIdx.y == 0)
        *zero_word = 0;
    const uint32_t g = blockIdx.z;
    const uint32_t m0 = blockIdx.x * kSfTile, k0 = blockIdx.y * kSfTile;
    uint32_t write_end = out_ld;  // rows [0, write_end) are written
    if (valid_rows != nullptr) {
        const int v = __ldg(valid_rows + g);
        if (v < static_cast<int>(mn)) write_end = v > 0 ? static_cast<uint32_t>(v) : 0u;
    }
    if (m0 >= write_end) return;  // uniform per block (before any __syncthreads)
    const uint32_t read_end = write_end < mn ? write_end : mn;

    const float* src = in + int64_t(g) * stride_g;
    float* dst = out + uint64_t(g) * kb * out_ld;
    const uint32_t tx = threadIdx.x, ty = threadIdx.y;
    const uint32_t i = m0 + tx;  // the row this thread writes
    // Elements not read (rows >= read_end: the pad rows, when written) are zeros.

    if (stride_k == 1 && stride_mn != 1) {
        // K-major input (the common per-token layout): reading a column per warp would
        // touch 32 rows kb floats apart. Instead a warp reads 32 consecutive k-blocks of
        // one row, the tile is transposed through shared memory (+1 column: no bank
        // conflicts), and a warp writes 32 consecutive rows of one k-block.
        __shared__ float tile[kSfTile][kSfTile + 1];
        const uint32_t j = k0 + tx;
        float v[kSfPerThread];  // all loads first, so they are in flight together
        #pragma unroll
        for (uint32_t s = 0; s < kSfPerThread; ++s) {
            const uint32_t r = m0 + ty + s * kSfTileRows;
            v[s] = r < read_end && j < kb ? src[int64_t(r) * stride_mn + j] : 0.0f;
        }
        #pragma unroll
        for (uint32_t s = 0; s < kSfPerThread; ++s) tile[ty + s * kSfTileRows][tx] = v[s];
        __syncthreads();
        #pragma unroll
        for (uint32_t s = 0; s < kSfPerThread; ++s) {
            const uint32_t c = ty + s * kSfTileRows;
            if (k0 + c < kb && i < write_end) dst[uint64_t(k0 + c) * out_ld + i] = tile[tx][c];
        }
    } else {
        // Any other strides: direct copy (coalesced reads when the input is MN-major).
        float v[kSfPerThread];  // loads first: `out` may alias `in` as far as the compiler knows
        #pragma unroll
        for (uint32_t s = 0; s < kSfPerThread; ++s) {
            const uint32_t jc = k0 + ty + s * kSfTileRows;
            v[s] = i < read_end && jc < kb ? src[int64_t(i) * stride_mn + int64_t(jc) * stride_k] : 0.0f;
        }
        #pragma unroll
        for (uint32_t s = 0; s < kSfPerThread; ++s) {
            const uint32_t jc = k0 + ty + s * kSfTileRows;
            if (jc < kb && i < write_end) dst[uint64_t(jc) * out_ld + i] = v[s];
        }
    }
}

}  // namespace deep_gemm
