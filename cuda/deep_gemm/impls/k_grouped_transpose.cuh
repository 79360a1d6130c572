// Layout kernel of the k-grouped `tn` form: the MN-major operand X [sum_k, mn] (e4m3,
// row-major, tokens as rows) becomes, per group g, the K-major [mn, k_g] matrix the SM90
// wgmma needs, the groups back to back (group g at element mn * o_g): exactly the `nt`
// form's flat layout. One CTA transposes a 128 (K) x 128 (mn) byte tile through shared
// memory; since every k_g is a multiple of 128, a tile never straddles two groups.
//
// Launch: block 256 threads; grid.x = K blocks of this launch (its groups' sum_k / 128),
// grid.y = ceil(mn / 128). `in` and `out` point at the launch's first group (row o_g0 of X,
// element mn * o_g0 of the output). Vector (16-byte) global loads need mn % 16 == 0 and a
// 16-byte aligned `in`; other widths take a byte-wise load path. Output rows are k_g bytes
// (a multiple of 128) and are written with 16-byte stores.
#pragma once
#include <deep_gemm/common/stdint.cuh>

namespace deep_gemm {

// Per-launch table: group j of the launch owns K blocks [kb_start[j], kb_start[j + 1]).
template <uint32_t kMaxGroups>
struct KGroupedTransposeArgs {
    uint32_t kb_start[kMaxGroups + 1];
    uint32_t num_groups;
};

namespace k_grouped_transpose {

constexpr uint32_t kTile = 128;        // bytes of K and of mn per tile
constexpr uint32_t kPitch = kTile + 4; // smem row pitch: 33 words, so the column reads below
                                       // (4 K-row groups x 8 words per warp) hit 2-way at most

// Bytes (r0.b[j], r1.b[j], r2.b[j], r3.b[j]) for j = 0..3: a 4x4 byte transpose.
__device__ __forceinline__ void transpose4x4(uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3, uint32_t (&col)[4]) {
    const uint32_t t0 = __byte_perm(r0, r1, 0x5140), t1 = __byte_perm(r0, r1, 0x7362);
    const uint32_t t2 = __byte_perm(r2, r3, 0x5140), t3 = __byte_perm(r2, r3, 0x7362);
    col[0] = __byte_perm(t0, t2, 0x5410);
    col[1] = __byte_perm(t0, t2, 0x7632);
    col[2] = __byte_perm(t1, t3, 0x5410);
    col[3] = __byte_perm(t1, t3, 0x7632);
}

}  // namespace k_grouped_transpose

template <uint32_t kMaxGroups>
__device__ __forceinline__ void k_grouped_transpose_impl(const uint8_t* __restrict__ in, uint8_t* __restrict__ out,
                                                         uint32_t mn, const KGroupedTransposeArgs<kMaxGroups>& args) {
    using namespace k_grouped_transpose;
    __shared__ __align__(16) uint32_t tile[kTile * kPitch / 4];
    const uint32_t kb = blockIdx.x;
    const uint32_t m_tile = blockIdx.y * kTile;
    const uint32_t tid = threadIdx.x;

    // Load 128 rows x 128 bytes: thread -> (row, 16-byte chunk), 4 chunks each. A warp
    // covers 4 rows x 8 chunks: word r * 33 + 4q + e hits 32 distinct banks for each e.
    const uint8_t* src = in + static_cast<size_t>(kb) * kTile * mn + m_tile;
    const bool vec = (mn % 16 == 0) && (reinterpret_cast<uintptr_t>(in) % 16 == 0);
#pragma unroll
    for (uint32_t i = 0; i < 4; ++i) {
        const uint32_t idx = tid + i * 256;
        const uint32_t row = idx / 8, q = idx % 8;
        const uint32_t col0 = q * 16;
        uint32_t w[4] = {0u, 0u, 0u, 0u};
        const uint8_t* p = src + static_cast<size_t>(row) * mn + col0;
        if (vec) {
            if (m_tile + col0 < mn) {
                const uint4 v = *reinterpret_cast<const uint4*>(p);
                w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
            }
        } else {
#pragma unroll
            for (uint32_t b = 0; b < 16; ++b)
                if (m_tile + col0 + b < mn) w[b / 4] |= static_cast<uint32_t>(p[b]) << (8 * (b % 4));
        }
#pragma unroll
        for (uint32_t e = 0; e < 4; ++e) tile[row * (kPitch / 4) + q * 4 + e] = w[e];
    }
    __syncthreads();

    // Which group of the launch this K block belongs to (the table is in the constant bank).
    uint32_t g = 0;
    while (g + 1 < args.num_groups && kb >= args.kb_start[g + 1]) ++g;
    const uint32_t k_g = (args.kb_start[g + 1] - args.kb_start[g]) * kTile;
    const size_t group_base = static_cast<size_t>(args.kb_start[g]) * kTile * mn;
    const uint32_t k_local = (kb - args.kb_start[g]) * kTile;

    // Store: thread -> (word column w = 4 mn values, 16 K rows kc*16..+15); a warp covers
    // 8 words x 4 K-row groups. Each thread writes 16 contiguous K bytes for 4 mn rows.
    const uint32_t warp = tid / 32, lane = tid % 32;
    const uint32_t w = (warp % 4) * 8 + lane % 8;
    const uint32_t kc = (warp / 4) * 4 + lane / 8;
    uint32_t cols[4][4];  // [mn j][K group of 4 rows]
#pragma unroll
    for (uint32_t r4 = 0; r4 < 4; ++r4) {
        const uint32_t row = kc * 16 + r4 * 4;
        uint32_t col[4];
        transpose4x4(tile[(row + 0) * (kPitch / 4) + w], tile[(row + 1) * (kPitch / 4) + w],
                     tile[(row + 2) * (kPitch / 4) + w], tile[(row + 3) * (kPitch / 4) + w], col);
#pragma unroll
        for (uint32_t j = 0; j < 4; ++j) cols[j][r4] = col[j];
    }
#pragma unroll
    for (uint32_t j = 0; j < 4; ++j) {
        const uint32_t m = m_tile + w * 4 + j;
        if (m < mn) {
            uint8_t* dst = out + group_base + static_cast<size_t>(m) * k_g + k_local + kc * 16;
            *reinterpret_cast<uint4*>(dst) = make_uint4(cols[j][0], cols[j][1], cols[j][2], cols[j][3]);
        }
    }
}

}  // namespace deep_gemm
