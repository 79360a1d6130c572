// The K loop of the FP8 "1D1D" scaling (1x128 scales along K for both operands), shared by
// the dense 1D1D and the k-grouped kernels: per 128-wide K block, the wgmmas into a fresh
// accumulator, then its promotion into the FP32 result with sfa[row] * sfb[col].
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

}  // namespace sm90_1d1d

}  // namespace deep_gemm
