// The head reduction of the V3.2 indexer's MQA logits (dense and paged): from one wgmma
// accumulator tile of scores, logits[row][t] = sf[row] * sum_h w[t][h] * relu(score[row][t, h]),
// or sum_h w[t][h] * relu(score * sf[row]) when a scale is negative.
//
// FRAGMENT (wgmma m64nNk32, A = 64 KV rows, B = kTokens query tokens x kHeads heads, both
// K-major): rows are KV rows, columns are (token, head) pairs, token-major (col = t * kHeads + h).
// Thread (warp w of the warpgroup, lane l) holds, as wgmma_e4m3.cuh documents,
//   acc[4j + 0, 1] -> KV row 16w + l/4,     cols 8j + 2(l%4) + {0, 1}
//   acc[4j + 2, 3] -> KV row 16w + l/4 + 8, same cols
// so each thread holds kHeads / 4 heads of each token for two KV rows, and the four lanes
// l%4 = 0..3 together hold all heads. The reduction is then: a multiply-add chain inside the
// thread (relu + FMA per score), a two-step reduce-scatter over those four lanes (xor 2, xor 1:
// 3/4 of the values cross lanes once, no shared memory), and one scale per result. Keeping
// heads on N (not M) is what keeps the reduction in registers: with heads on M a column's 64
// heads sit in 32 threads of 4 warps.
//
// INTERFACE (kHeads a multiple of 8, kTokens 1 or even, kHeads * kTokens <= 256):
//   MqaHeadReduce<kHeads, kTokens>::load_weights(w, ld, num_tokens, lane, wr)
//     wr[kNumWeights]: this lane's weights w[t * ld + h] (tokens >= num_tokens read as 0).
//   MqaHeadReduce<kHeads, kTokens>::reduce(acc, wr, sf_lo, sf_hi, lane, out)
//     sf_lo / sf_hi: the KV scales of this thread's rows (16w + l/4 and +8). Every lane of the
//     warp must call it (shuffles). out[kOutPerLane]: results; out[i] belongs to KV row
//     out_row(i, warp, lane) (0..63 in the tile) and token out_token(i, lane). With one token
//     (paged decode, next_n = 1) two lanes hold each result: only out_owner(lane) stores it.
#pragma once
#include <deep_gemm/common/stdint.cuh>

namespace deep_gemm::epilogue {

template <uint32_t kHeads, uint32_t kTokens>
struct MqaHeadReduce {
    static_assert(kHeads % 8 == 0, "heads come in groups of 8 columns (one accumulator quad per lane)");
    static_assert(kTokens == 1 || kTokens % 2 == 0, "2 * kTokens values are reduce-scattered over 4 lanes");
    static constexpr uint32_t kN = kHeads * kTokens;
    static_assert(kN <= 256 && kN % 16 == 0, "one wgmma of N = kHeads * kTokens");
    static constexpr uint32_t kNumAccum = kN / 2;
    static constexpr uint32_t kNumWeights = kN / 4;  // 2 per column quad j
    static constexpr uint32_t kQuadsPerToken = kHeads / 8;
    static constexpr uint32_t kNumValues = 2 * kTokens;  // (row half, token) pairs per lane
    static constexpr uint32_t kOutPerLane = kNumValues >= 4 ? kNumValues / 4 : 1;

    // wr[2j + e] = w[t][8 (j - t * kQuadsPerToken) + 2 (l % 4) + e], t = j / kQuadsPerToken.
    __device__ __forceinline__ static void load_weights(const float* w, uint32_t ld, uint32_t num_tokens,
                                                        uint32_t lane, float (&wr)[kNumWeights]) {
#pragma unroll
        for (uint32_t j = 0; j < kN / 8; ++j) {
            const uint32_t t = j / kQuadsPerToken;
            const uint32_t h = 8 * (j % kQuadsPerToken) + 2 * (lane % 4);
#pragma unroll
            for (uint32_t e = 0; e < 2; ++e) wr[2 * j + e] = t < num_tokens ? __ldg(w + t * ld + h + e) : 0.0f;
        }
    }

    // Value index of (row half, token): v = half * kTokens + t. After the reduce-scatter lane
    // l holds values (l % 4) * kOutPerLane + i.
    __device__ __forceinline__ static uint32_t out_index(uint32_t i, uint32_t lane) {
        if constexpr (kNumValues >= 4) return (lane % 4) * kOutPerLane + i;
        else return (lane % 4) / 2;  // one token: lanes 2k and 2k + 1 both hold value k
    }
    __device__ __forceinline__ static bool out_owner(uint32_t lane) { return kNumValues >= 4 || lane % 2 == 0; }
    __device__ __forceinline__ static uint32_t out_token(uint32_t i, uint32_t lane) {
        return out_index(i, lane) % kTokens;
    }
    __device__ __forceinline__ static uint32_t out_row(uint32_t i, uint32_t warp, uint32_t lane) {
        return 16 * warp + lane / 4 + 8 * (out_index(i, lane) / kTokens);
    }

    // The in-thread part: per (half, token), sum over this lane's heads. kPositive: the scale
    // is applied after the sum (sf >= 0 makes relu(s * sf) = sf * relu(s)); otherwise per score.
    template <bool kPositive>
    __device__ __forceinline__ static void partial_sums(const float (&acc)[kNumAccum], const float (&wr)[kNumWeights],
                                                        float sf_lo, float sf_hi, float (&v)[kNumValues]) {
#pragma unroll
        for (uint32_t t = 0; t < kTokens; ++t) {
            // Two chains per row (even and odd column) halve the FMA dependency depth.
            float lo[2] = {0.0f, 0.0f}, hi[2] = {0.0f, 0.0f};
#pragma unroll
            for (uint32_t q = 0; q < kQuadsPerToken; ++q) {
                const uint32_t j = t * kQuadsPerToken + q;
#pragma unroll
                for (uint32_t e = 0; e < 2; ++e) {
                    const float a_lo = kPositive ? acc[4 * j + e] : acc[4 * j + e] * sf_lo;
                    const float a_hi = kPositive ? acc[4 * j + 2 + e] : acc[4 * j + 2 + e] * sf_hi;
                    lo[e] = fmaf(fmaxf(a_lo, 0.0f), wr[2 * j + e], lo[e]);
                    hi[e] = fmaf(fmaxf(a_hi, 0.0f), wr[2 * j + e], hi[e]);
                }
            }
            v[t] = lo[0] + lo[1];
            v[kTokens + t] = hi[0] + hi[1];
        }
    }

    // Reduce-scatter of n values over the lanes that differ in `mask`: the lane whose mask bit
    // is clear keeps the first half (adding its partner's first half), the other the second.
    template <uint32_t kCount>
    __device__ __forceinline__ static void reduce_scatter_step(float (&v)[kNumValues], uint32_t mask, uint32_t lane) {
        const bool upper = (lane & mask) != 0;
#pragma unroll
        for (uint32_t i = 0; i < kCount / 2; ++i) {
            const float send = upper ? v[i] : v[i + kCount / 2];
            const float keep = upper ? v[i + kCount / 2] : v[i];
            v[i] = keep + __shfl_xor_sync(0xffffffffu, send, mask);
        }
    }

    __device__ __forceinline__ static void reduce(const float (&acc)[kNumAccum], const float (&wr)[kNumWeights],
                                                  float sf_lo, float sf_hi, uint32_t lane, float (&out)[kOutPerLane]) {
        float v[kNumValues];
        // Per-token scales from amax / 448 are never negative: the common path scales once per
        // result. The vote keeps the branch warp-uniform (the shuffles below need all lanes).
        const bool positive = __all_sync(0xffffffffu, sf_lo >= 0.0f && sf_hi >= 0.0f);
        if (positive) partial_sums<true>(acc, wr, sf_lo, sf_hi, v);
        else partial_sums<false>(acc, wr, sf_lo, sf_hi, v);
        reduce_scatter_step<kNumValues>(v, 2, lane);
        if constexpr (kNumValues >= 4) reduce_scatter_step<kNumValues / 2>(v, 1, lane);
        else v[0] += __shfl_xor_sync(0xffffffffu, v[0], 1);
#pragma unroll
        for (uint32_t i = 0; i < kOutPerLane; ++i) {
            const float sf = out_index(i, lane) < kTokens ? sf_lo : sf_hi;
            out[i] = positive ? v[i] * sf : v[i];
        }
    }
};

}  // namespace deep_gemm::epilogue
