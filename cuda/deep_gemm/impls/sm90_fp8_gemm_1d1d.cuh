// SM90 FP8 GEMM, "1D1D" scaling (weight-gradient style), FP32 output with accumulation:
//   D[M,N] (fp32) = C + (A * SFA) @ (B * SFB)^T      (C may be D itself, or null: D = A*B^T)
//   A   [M, K] e4m3, K-major            (TMA, 128B swizzle)
//   SFA fp32 [ceil(K/128), align(M,4)]  MN-major, one scale per row of A per 128 K (TMA)
//   B   [N, K] e4m3, K-major            (TMA, 128B swizzle)
//   SFB fp32 [ceil(K/128), align(N,4)]  MN-major, one scale per row of B per 128 K (TMA)
//   C, D fp32 row-major with row pitch ld_d elements (even), written with 8-byte stores;
//   or D bf16 (OutT) without C, written with 4-byte stores of column pairs
// Any K > 0 (a partial last K block reads zeros past K); M and N arbitrary.
#pragma once
#include <deep_gemm/common/sm90_fp8_1d1d_k_loop.cuh>
#include <deep_gemm/epilogue/sm90_store_bf16.cuh>
#include <deep_gemm/epilogue/sm90_store_fp32.cuh>

namespace deep_gemm {

// Template parameters as in sm90_fp8_gemm_1d2d_impl; OutT: float (D = C + A B^T) or
// __nv_bfloat16 (D = A B^T, no C: upstream's wgrad form without accumulation).
template <uint32_t kShapeM, uint32_t kShapeN, uint32_t kShapeK, uint32_t kBlockM, uint32_t kBlockN,
          uint32_t kStages, uint32_t kCluster, uint32_t kGroupN, sm90::MBoxes kMBoxes = sm90::MBoxes::kBlock,
          typename OutT = float>
__device__ __forceinline__ void sm90_fp8_gemm_1d1d_impl(uint32_t shape_m, uint32_t shape_n, uint32_t shape_k,
                                                        const float* c, OutT* d, uint32_t ld_d,
                                                        const CUtensorMap* tmap_a, const CUtensorMap* tmap_b,
                                                        const CUtensorMap* tmap_sfa, const CUtensorMap* tmap_sfb,
                                                        const CUtensorMap* tmap_a_tail = nullptr,
                                                        const CUtensorMap* tmap_sfa_tail = nullptr) {
    using namespace sm90;
    constexpr uint32_t kNumMathWG = kBlockM / 64;
    constexpr uint32_t kNumMathThreads = kNumMathWG * 128;
    static_assert(register_budgets_fit(kNumMathThreads, kProducerRegs, kMathRegs), "setmaxnreg budgets over the entry allocation");
    static_assert(kBlockM == 64 || kBlockM == 128, "BLOCK_M is 64 or 128");
    static_assert(kBlockN % 8 == 0 && kBlockN >= 8 && kBlockN <= 256, "BLOCK_N: multiple of 8 in [8, 256]");
    static_assert(kMBoxes == MBoxes::kBlock || kCluster == 1, "boxes of the rows that exist: cluster 1");
    using Layout = Fp8SmemLayout<kBlockM, kBlockN, kStages, true, 0>;
    static_assert(kNumMathWG * 4 <= Layout::kMaxMathWarps, "reads_done words for every math thread");
    static_assert(launch_smem_fits<Layout>(), "the launch allocates less shared memory than this layout");
    using Scheduler = TileScheduler<GemmType::kNormal, kBlockM, kBlockN, kGroupN, kCluster>;

    const uint32_t m = shape_dim<kShapeM>(shape_m);
    const uint32_t n = shape_dim<kShapeN>(shape_n);
    const uint32_t k = shape_dim<kShapeK>(shape_k);
    // A K not a multiple of 128 ends in a partial block: its TMA boxes read zeros past K.
    const uint32_t num_k_blocks = ceil_div(k, kBlockK);

    extern __shared__ uint8_t smem_raw[];
    const Layout smem(smem_raw);

    gemm_kernel_setup<Layout, kStages, kNumMathWG * 4, kCluster>(smem, kNumMathThreads, tmap_a, tmap_b, tmap_sfa,
                                                                 tmap_sfb, tmap_a_tail, tmap_sfa_tail);

    if (threadIdx.x >= kNumMathThreads) {
        ptx::setmaxnreg_dec<kProducerRegs>();
        const BoxRows box = box_rows<kMBoxes, kBlockM>(m);
        if (threadIdx.x == kNumMathThreads)
            producer_loop<Layout, Scheduler, kBlockM, kBlockN, kStages, kCluster, true, false, true,
                          kMBoxes == MBoxes::kTail, false, /*kRolledK=*/true>(
                smem, Scheduler(m, n), num_k_blocks, tmap_a, tmap_b, tmap_sfa, tmap_sfb,
                Layout::stage_tx_bytes(box.a, box.sfa),
                tail_maps<Layout, kBlockM, kMBoxes, true>(m, tmap_a_tail, tmap_sfa_tail));
        __syncwarp();
    } else {
        ptx::setmaxnreg_inc<kMathRegs>();
        const MathThread me = math_thread();
        const uint32_t wg = me.wg, warp = me.warp, lane = me.lane, row_lo = me.row_lo;
        const StageDescs<Layout> descs(smem, wg);
        Scheduler sched(m, n);
        PipeState<kStages> pipe;
        TileInfo tile;
        float result[kBlockN / 2], acc[kBlockN / 2];
        while (sched.next(tile)) {
            const uint32_t m0 = tile.m_block * kBlockM, n0 = tile.n_block * kBlockN;
            sm90_1d1d::accumulate_tile<kBlockN, kStages, kCluster>(result, acc, smem, descs, pipe, num_k_blocks,
                                                                   row_lo, wg * 4 + warp, lane, tile.peer_alive);
            if constexpr (sizeof(OutT) == sizeof(float))
                epilogue::store_tile<kBlockN>(result, d, c, ld_d, m0 + row_lo, n0, m, n, lane);
            else
                epilogue::store_tile_bf16_direct<kBlockN>(result, d, ld_d, m0 + row_lo, n0, m, n, lane);
        }
    }
    if constexpr (kCluster > 1) ptx::cluster_sync();
}

}  // namespace deep_gemm
