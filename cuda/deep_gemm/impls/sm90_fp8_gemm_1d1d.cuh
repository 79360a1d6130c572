// SM90 FP8 GEMM, "1D1D" scaling (weight-gradient style), FP32 output with accumulation:
//   D[M,N] (fp32) = C + (A * SFA) @ (B * SFB)^T      (C may be D itself, or null: D = A*B^T)
//   A   [M, K] e4m3, K-major            (TMA, 128B swizzle)
//   SFA fp32 [ceil(K/128), align(M,4)]  MN-major, one scale per row of A per 128 K (TMA)
//   B   [N, K] e4m3, K-major            (TMA, 128B swizzle)
//   SFB fp32 [ceil(K/128), align(N,4)]  MN-major, one scale per row of B per 128 K (TMA)
//   C, D fp32 row-major with row pitch ld_d elements (even), written with 8-byte stores
// K must be a multiple of 128; M and N arbitrary.
#pragma once
#include <deep_gemm/common/sm90_fp8_core.cuh>

namespace deep_gemm {

namespace sm90_1d1d {

// This thread's SFB pairs of a stage: columns j * 8 + (lane % 4) * 2 and + 1, j < kBlockN / 8.
template <uint32_t kBlockN>
struct SfbPairs {
    float2 v[kBlockN / 8];
    __device__ __forceinline__ SfbPairs(const float* sfb_stage, uint32_t lane) {
#pragma unroll
        for (uint32_t j = 0; j < kBlockN / 8; ++j)
            v[j] = *reinterpret_cast<const float2*>(sfb_stage + j * 8 + (lane % 4) * 2);
    }
    // A value that depends on every pair (for release_stage_after_reads).
    __device__ __forceinline__ uint32_t bits() const {
        uint32_t x = 0;
#pragma unroll
        for (uint32_t j = 0; j < kBlockN / 8; ++j) x ^= sm90::bits_of(v[j].x, v[j].y);
        return x;
    }
};

// result += acc * sfa[row] * sfb[col].
template <uint32_t kBlockN>
__device__ __forceinline__ void promote(float (&result)[kBlockN / 2], const float (&acc)[kBlockN / 2],
                                        float sfa_lo, float sfa_hi, const SfbPairs<kBlockN>& sfb) {
#pragma unroll
    for (uint32_t j = 0; j < kBlockN / 8; ++j) {
        const float2 sb = sfb.v[j];
        result[4 * j + 0] = fmaf(acc[4 * j + 0] * sb.x, sfa_lo, result[4 * j + 0]);
        result[4 * j + 1] = fmaf(acc[4 * j + 1] * sb.y, sfa_lo, result[4 * j + 1]);
        result[4 * j + 2] = fmaf(acc[4 * j + 2] * sb.x, sfa_hi, result[4 * j + 2]);
        result[4 * j + 3] = fmaf(acc[4 * j + 3] * sb.y, sfa_hi, result[4 * j + 3]);
    }
}

// c[row, col..col+1]; zeros past M or N (a pair straddling N loads its one column).
__device__ __forceinline__ float2 load_pair(const float* c, uint32_t ld, uint32_t row, uint32_t col, uint32_t m,
                                            uint32_t n) {
    if (row >= m || col >= n) return make_float2(0.0f, 0.0f);
    const size_t idx = static_cast<size_t>(row) * ld + col;
    if (col + 1 < n) return *reinterpret_cast<const float2*>(c + idx);
    return make_float2(c[idx], 0.0f);
}

// d[row, col..col+1] = v, clipped at M and N.
__device__ __forceinline__ void store_pair(float* d, uint32_t ld, uint32_t row, uint32_t col, uint32_t m, uint32_t n,
                                           float2 v) {
    if (row >= m || col >= n) return;
    const size_t idx = static_cast<size_t>(row) * ld + col;
    if (col + 1 < n) *reinterpret_cast<float2*>(d + idx) = v;
    else d[idx] = v.x;
}

// One tile's K loop, shared by the dense and k-grouped kernels: `result` (zeroed here)
// accumulates every K block's wgmmas promoted with both scales. The stage's scales are read
// before its wgmmas are issued (their latency hides under the wgmmas), and the stage is
// handed back once those reads are in registers (release_stage_after_reads). `warp`: this
// thread's math warp (0 .. 4 * warpgroups - 1).
template <uint32_t kBlockN, uint32_t kStages, uint32_t kCluster, typename Layout>
__device__ __forceinline__ void accumulate_tile(float (&result)[kBlockN / 2], float (&acc)[kBlockN / 2],
                                                const Layout& smem, const sm90::StageDescs<Layout>& descs,
                                                sm90::PipeState<kStages>& pipe, uint32_t num_k_blocks,
                                                uint32_t row_lo, uint32_t warp, uint32_t lane, bool peer_alive) {
#pragma unroll
    for (uint32_t i = 0; i < kBlockN / 2; ++i) result[i] = 0.0f;
    for (uint32_t kb = 0; kb < num_k_blocks; ++kb, pipe.advance()) {
        const uint32_t s = pipe.stage;
        ptx::mbar_wait(smem.full(s), pipe.phase);
        const float sfa_lo = smem.sfa(s)[row_lo], sfa_hi = smem.sfa(s)[row_lo + 8];
        const SfbPairs<kBlockN> sfb(smem.sfb(s), lane);
        sm90::mma_k_block<kBlockN>(descs.a(s), descs.b(s), acc);
        sm90::release_stage_after_reads<kCluster>(smem.empty(s), smem.reads_done(warp, lane),
                                                  sfb.bits() ^ sm90::bits_of(sfa_lo, sfa_hi), lane, peer_alive);
        promote<kBlockN>(result, acc, sfa_lo, sfa_hi, sfb);
    }
}

// d = c + result for this thread's rows r and r + 8 of the tile starting at column n0.
// All of the thread's C values are loaded before its first store. c may be d, so the
// compiler cannot hoist a load of C above an earlier store of D: taken pair by pair, each
// pair waited one memory latency (64 per tile at BLOCK_N 128). Each element is read and
// written by the same thread only, so loading them all first is exact. Measured on the H200
// (2026-12-01, with the K loop of 482728d): k-grouped wgrad 553 -> 708
// TFLOP/s, dense 4096x7168x2048 with FP32 += 376 -> 230 us.
template <uint32_t kBlockN>
__device__ __forceinline__ void store_tile(const float (&result)[kBlockN / 2], float* d, const float* c, uint32_t ld,
                                           uint32_t r, uint32_t n0, uint32_t m, uint32_t n, uint32_t lane) {
    float2 prev[kBlockN / 4];
#pragma unroll
    for (uint32_t j = 0; j < kBlockN / 8; ++j) {
        const uint32_t col = n0 + j * 8 + (lane % 4) * 2;
        prev[2 * j + 0] = c != nullptr ? load_pair(c, ld, r, col, m, n) : make_float2(0.0f, 0.0f);
        prev[2 * j + 1] = c != nullptr ? load_pair(c, ld, r + 8, col, m, n) : make_float2(0.0f, 0.0f);
    }
#pragma unroll
    for (uint32_t j = 0; j < kBlockN / 8; ++j) {
        const uint32_t col = n0 + j * 8 + (lane % 4) * 2;
        store_pair(d, ld, r, col, m, n,
                   make_float2(prev[2 * j + 0].x + result[4 * j + 0], prev[2 * j + 0].y + result[4 * j + 1]));
        store_pair(d, ld, r + 8, col, m, n,
                   make_float2(prev[2 * j + 1].x + result[4 * j + 2], prev[2 * j + 1].y + result[4 * j + 3]));
    }
}

}  // namespace sm90_1d1d

// Template parameters as in sm90_fp8_gemm_1d2d_impl.
template <uint32_t kShapeM, uint32_t kShapeN, uint32_t kShapeK, uint32_t kBlockM, uint32_t kBlockN,
          uint32_t kStages, uint32_t kCluster, uint32_t kGroupN, sm90::MBoxes kMBoxes = sm90::MBoxes::kBlock>
__device__ __forceinline__ void sm90_fp8_gemm_1d1d_impl(uint32_t shape_m, uint32_t shape_n, uint32_t shape_k,
                                                        const float* c, float* d, uint32_t ld_d,
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
    const uint32_t num_k_blocks = k / kBlockK;

    extern __shared__ uint8_t smem_raw[];
    const Layout smem(smem_raw);

    gemm_kernel_setup<Layout, kStages, kNumMathWG * 4, kCluster>(smem, kNumMathThreads, tmap_a, tmap_b, tmap_sfa,
                                                                 tmap_sfb, tmap_a_tail, tmap_sfa_tail);

    if (threadIdx.x >= kNumMathThreads) {
        ptx::setmaxnreg_dec<kProducerRegs>();
        const BoxRows box = box_rows<kMBoxes, kBlockM>(m);
        if (threadIdx.x == kNumMathThreads)
            producer_loop<Layout, Scheduler, kBlockM, kBlockN, kStages, kCluster, true, false, true,
                          kMBoxes == MBoxes::kTail>(
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
            sm90_1d1d::store_tile<kBlockN>(result, d, c, ld_d, m0 + row_lo, n0, m, n, lane);
        }
    }
    if constexpr (kCluster > 1) ptx::cluster_sync();
}

}  // namespace deep_gemm
