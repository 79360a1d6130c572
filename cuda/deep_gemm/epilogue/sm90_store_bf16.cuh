// Epilogue: an FP32 result tile of the SM90 wgmma accumulator layout stored as bf16, through
// shared memory (stmatrix into a swizzled staging tile, then TMA stores) or, for rows that
// must stay untouched, straight from registers. For every kernel family with a bf16 D.
#pragma once
#include <cuda_bf16.h>
#include <deep_gemm/common/tensor_map.cuh>
#include <deep_gemm/common/utils.cuh>
#include <deep_gemm/ptx/stmatrix.cuh>
#include <deep_gemm/ptx/sync.cuh>
#include <deep_gemm/ptx/tma.cuh>

namespace deep_gemm::epilogue {

// Column maps of the bf16 epilogue: product column -> D column.
struct IdentityColumns {
    static constexpr bool kIdentity = true;
    static __device__ __forceinline__ uint32_t map(uint32_t col) { return col; }
    template <uint32_t kAtomCols>
    static constexpr bool atoms_fit() { return true; }
};

// fp8_gemm_nt_skip_head_mid: the product has heads of kLeft + kRight columns; D has heads of
// kLeft + kMid + kRight, and each head's kMid middle columns are skipped (left untouched).
template <uint32_t kLeft, uint32_t kMid, uint32_t kRight>
struct SkipHeadMid {
    static constexpr bool kIdentity = false;
    static __device__ __forceinline__ uint32_t map(uint32_t col) {
        const uint32_t head = col / (kLeft + kRight), j = col % (kLeft + kRight);
        return head * (kLeft + kMid + kRight) + j + (j >= kLeft ? kMid : 0);
    }
    template <uint32_t kAtomCols>
    static constexpr bool atoms_fit() { return kLeft % kAtomCols == 0 && kRight % kAtomCols == 0; }
};

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
}

// Epilogue of one warpgroup, in three steps: its kSlabs x 64 rows of the tile go to shared
// memory as bf16 via stmatrix, laid out per slab as column "atoms" of [64 rows][kSwizzle
// bytes] in the TMA swizzle pattern (conflict-free stmatrix rows), then one thread
// TMA-stores each atom. The TMA clips rows >= M and columns >= N. bar_id: the named barrier
// of this warpgroup (0 is __syncthreads).
template <uint32_t kBlockN>
struct EpilogueBf16 {
    static constexpr uint32_t kSwizzle = epilogue_swizzle_bytes(kBlockN * 2);
    static constexpr uint32_t kAtomBytes = 64 * kSwizzle;
    static constexpr uint32_t kSlabBytes = 64 * kBlockN * 2;
    static_assert(kSwizzle != 0, "BLOCK_N must be a multiple of 16");

    // The previous tile's stores must have finished reading the staging buffer.
    static __device__ __forceinline__ void begin(uint32_t bar_id) {
        if (threadIdx.x % 128 == 0) ptx::tma_store_wait_read<0>();
        ptx::named_barrier_sync(bar_id, 128);
    }

    static __device__ __forceinline__ void stage(const float (&result)[kBlockN / 2], uint8_t* slab) {
        const uint32_t thread = threadIdx.x % 128, warp = thread / 32, lane = thread % 32;
        const uint32_t base = ptx::smem_addr(slab);
        const uint32_t row = warp * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
#pragma unroll
        for (uint32_t p = 0; p < kBlockN / 16; ++p) {
            const uint32_t col_byte = p * 32 + (lane / 16) * 16;
            uint32_t off = (col_byte / kSwizzle) * kAtomBytes + row * kSwizzle + col_byte % kSwizzle;
            off ^= ((off >> 7) & (kSwizzle / 16 - 1)) << 4;  // the TMA's address-bit XOR swizzle
            ptx::stmatrix_x4(base + off,
                             pack_bf16x2(result[8 * p + 0], result[8 * p + 1]),
                             pack_bf16x2(result[8 * p + 2], result[8 * p + 3]),
                             pack_bf16x2(result[8 * p + 4], result[8 * p + 5]),
                             pack_bf16x2(result[8 * p + 6], result[8 * p + 7]));
        }
    }

    // Slab i of `stage_wg` goes to rows row0 + slab_stride * i; only the slabs set in
    // `slab_mask` (warpgroup-uniform) are stored. ColMap maps a column of the product to
    // its column in D (identity, or SkipHeadMid); it is applied per atom, so an atom must
    // not straddle a seam of the map. kRank3: tmap_d is a rank-3 map [batch][rows][cols]
    // (the masked GEMM's groups) and the rows are those of batch `z`.
    template <uint32_t kSlabs, typename ColMap = IdentityColumns, bool kRank3 = false>
    static __device__ __forceinline__ void finish(uint8_t* stage_wg, const CUtensorMap* tmap_d, uint32_t bar_id,
                                                  uint32_t row0, uint32_t slab_stride, uint32_t n0,
                                                  uint32_t slab_mask = (1u << kSlabs) - 1, int32_t z = 0) {
        ptx::fence_proxy_async_smem();
        ptx::named_barrier_sync(bar_id, 128);
        if (threadIdx.x % 128 == 0) {
#pragma unroll
            for (uint32_t i = 0; i < kSlabs; ++i) {
                if (!(slab_mask >> i & 1u)) continue;
#pragma unroll
                for (uint32_t a = 0; a < kBlockN * 2 / kSwizzle; ++a) {
                    const auto x = static_cast<int32_t>(ColMap::map(n0 + a * kSwizzle / 2));
                    const auto y = static_cast<int32_t>(row0 + i * slab_stride);
                    if constexpr (kRank3) ptx::tma_store_3d(tmap_d, stage_wg + i * kSlabBytes + a * kAtomBytes, x, y, z);
                    else ptx::tma_store_2d(tmap_d, stage_wg + i * kSlabBytes + a * kAtomBytes, x, y);
                }
            }
            ptx::tma_store_commit();
        }
    }
};

template <uint32_t kBlockN, uint32_t kSlabs, typename ColMap = IdentityColumns>
__device__ __forceinline__ void store_tile_bf16(const float (&result)[kSlabs][kBlockN / 2], uint8_t* stage_wg,
                                                const CUtensorMap* tmap_d, uint32_t bar_id, uint32_t row0,
                                                uint32_t slab_stride, uint32_t n0) {
    using Epi = EpilogueBf16<kBlockN>;
    static_assert(ColMap::template atoms_fit<Epi::kSwizzle / 2>(), "a staging atom straddles a seam of the column map");
    Epi::begin(bar_id);
#pragma unroll
    for (uint32_t i = 0; i < kSlabs; ++i) Epi::stage(result[i], stage_wg + i * Epi::kSlabBytes);
    Epi::template finish<kSlabs, ColMap>(stage_wg, tmap_d, bar_id, row0, slab_stride, n0);
}

// One slab's valid rows written straight from registers (bf16 pairs, columns < n; the row
// pitch ld_d is even): for slabs where some rows must stay untouched.
template <uint32_t kBlockN>
__device__ __forceinline__ void store_rows_direct(const float (&result)[kBlockN / 2], uint32_t row_lo, bool lo_ok,
                                                  bool hi_ok, uint32_t n0, __nv_bfloat16* d, uint32_t ld_d,
                                                  uint32_t n) {
    const uint32_t lane = threadIdx.x % 32;
#pragma unroll
    for (uint32_t j = 0; j < kBlockN / 8; ++j) {
        const uint32_t col = n0 + j * 8 + (lane % 4) * 2;
        if (col >= n) continue;
        if (lo_ok)
            *reinterpret_cast<uint32_t*>(d + static_cast<size_t>(row_lo) * ld_d + col) =
                pack_bf16x2(result[4 * j + 0], result[4 * j + 1]);
        if (hi_ok)
            *reinterpret_cast<uint32_t*>(d + static_cast<size_t>(row_lo + 8) * ld_d + col) =
                pack_bf16x2(result[4 * j + 2], result[4 * j + 3]);
    }
}

// A whole tile written straight from registers as bf16 (no staging tile, no TMA), optionally
// onto C (bf16, D's layout; may be D itself): for kernels whose shared memory holds no D
// tile. Rows >= m and columns >= n are left alone; a pair straddling an odd n stores its one
// column. The row pitch ld_d is even and d 4-byte aligned, so a pair is one 4-byte store.
// All of a thread's C values are loaded before its first store, as in store_tile (fp32).
template <uint32_t kBlockN>
__device__ __forceinline__ void store_tile_bf16_direct(const float (&result)[kBlockN / 2], __nv_bfloat16* d,
                                                       uint32_t ld_d, uint32_t r, uint32_t n0, uint32_t m,
                                                       uint32_t n, uint32_t lane,
                                                       const __nv_bfloat16* c = nullptr) {
    float2 prev[kBlockN / 4];
#pragma unroll
    for (uint32_t j = 0; j < kBlockN / 8; ++j) {
        const uint32_t col = n0 + j * 8 + (lane % 4) * 2;
#pragma unroll
        for (uint32_t h = 0; h < 2; ++h) {
            const uint32_t row = r + h * 8;
            float2 v = make_float2(0.0f, 0.0f);
            if (c != nullptr && row < m && col < n) {
                const __nv_bfloat16* p = c + static_cast<size_t>(row) * ld_d + col;
                if (col + 1 < n) v = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
                else v.x = __bfloat162float(*p);
            }
            prev[2 * j + h] = v;
        }
    }
#pragma unroll
    for (uint32_t j = 0; j < kBlockN / 8; ++j) {
        const uint32_t col = n0 + j * 8 + (lane % 4) * 2;
        if (col >= n) continue;
#pragma unroll
        for (uint32_t h = 0; h < 2; ++h) {
            const uint32_t row = r + h * 8;
            if (row >= m) continue;
            __nv_bfloat16* p = d + static_cast<size_t>(row) * ld_d + col;
            const float lo = prev[2 * j + h].x + result[4 * j + 2 * h];
            const float hi = prev[2 * j + h].y + result[4 * j + 2 * h + 1];
            if (col + 1 < n) *reinterpret_cast<uint32_t*>(p) = pack_bf16x2(lo, hi);
            else *p = __float2bfloat16_rn(lo);
        }
    }
}

// Epilogue of the m-grouped variants, where some rows of a tile must stay untouched
// (contiguous padding rows or another group's rows, rows past masked_m / a psum group's
// end). lo_ok/hi_ok[i]: whether this thread's two rows of slab i are stored. A slab whose
// rows are all stored goes through shared memory and the TMA like store_tile_bf16; the
// others are written row by row from registers. kRank3: as EpilogueBf16::finish (the rows
// are those of batch z of tmap_d, and `d` points at that batch's first row).
template <uint32_t kBlockN, uint32_t kSlabs, bool kRank3 = false>
__device__ __forceinline__ void store_tile_bf16_rows(const float (&result)[kSlabs][kBlockN / 2], uint8_t* stage_wg,
                                                     const CUtensorMap* tmap_d, uint32_t bar_id, uint32_t row0,
                                                     uint32_t slab_stride, uint32_t n0, const bool (&lo_ok)[kSlabs],
                                                     const bool (&hi_ok)[kSlabs], __nv_bfloat16* d, uint32_t ld_d,
                                                     uint32_t n, int32_t z = 0) {
    using Epi = EpilogueBf16<kBlockN>;
    const uint32_t thread = threadIdx.x % 128, warp = thread / 32, lane = thread % 32;
    if (thread == 0) ptx::tma_store_wait_read<0>();
    // The first of these barriers also orders the previous tile's store before this
    // tile's stmatrix.
    uint32_t full_mask = 0;
#pragma unroll
    for (uint32_t i = 0; i < kSlabs; ++i)
        full_mask |= static_cast<uint32_t>(ptx::named_barrier_and(bar_id, 128, lo_ok[i] && hi_ok[i])) << i;
#pragma unroll
    for (uint32_t i = 0; i < kSlabs; ++i) {
        if (full_mask >> i & 1u)
            Epi::stage(result[i], stage_wg + i * Epi::kSlabBytes);
        else
            store_rows_direct<kBlockN>(result[i], row0 + i * slab_stride + warp * 16 + lane / 4, lo_ok[i], hi_ok[i],
                                       n0, d, ld_d, n);
    }
    if (full_mask != 0)
        Epi::template finish<kSlabs, IdentityColumns, kRank3>(stage_wg, tmap_d, bar_id, row0, slab_stride, n0,
                                                              full_mask, z);
}

}  // namespace deep_gemm::epilogue
