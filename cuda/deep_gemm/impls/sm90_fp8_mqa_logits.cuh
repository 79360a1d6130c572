// SM90 FP8 MQA logits (the V3.2 indexer, prefill):
//   logits[i][j] = sum_h relu(q[i, h] . kv[j] * sf[j]) * w[i, h]   for j in [ks[i], ke[i])
//   q [S, H, D] e4m3 (a [S * H, D] K-major map), kv [S_kv, D] e4m3 K-major, sf [S_kv] fp32,
//   w [S, H] fp32, ks / ke [S] int32 (clamped to [0, S_kv]); logits [S, ld] fp32 or bf16.
// kCompressed: row i holds key ks[i] + c at column c < max_seqlen_k (other cells untouched).
// kClean (not compressed): cells outside the window are -inf; without it they are untouched.
//
// A CTA owns kBlockQ query tokens at a time (kQColumns = kBlockQ * H columns of B, 128 or 256,
// resident in a double-buffered Q stage; blocks taken in QBlockOrder) and streams the KV blocks of the union of their windows
// (blocks outside every window are skipped) through the shared TMA ring: per stage 128 KV rows
// and their scales. Math warpgroup g computes the 64 x kQColumns tile of KV rows g * 64..
// against all (token, head) columns (A = KV, B = Q, both K-major: one wgmma m64nNk32 per 32 of
// D), and reduces heads in registers (epilogue/sm90_mqa_logits_reduce.cuh). At N = 128 its
// accumulators are double-buffered (block b + 1's wgmmas run while block b is reduced); at
// N = 256 one set, the other warpgroup's wgmmas filling the gap. Warps 1-3 of the producer
// warpgroup write the -inf cells left and right of the CTA's KV range.
#pragma once
#include <cuda_bf16.h>
#include <deep_gemm/common/sm90_pipeline.cuh>
#include <deep_gemm/epilogue/sm90_mqa_logits_reduce.cuh>
#include <deep_gemm/mma/wgmma_e4m3.cuh>
#include <deep_gemm/ptx/wgmma.cuh>

namespace deep_gemm {

namespace sm90_mqa {

constexpr uint32_t kBlockKV = 128;     // KV rows per stage: 64 per math warpgroup
constexpr uint32_t kNumMathWG = 2;
constexpr uint32_t kNumMathThreads = kNumMathWG * 128;
constexpr uint32_t kQStages = 2;

// Dynamic shared memory from a 1024-byte aligned base:
//   [Q x 2] [KV x kStages] [scales x kStages] [release words] [barriers: full, empty, q_full, q_empty]
template <uint32_t kHeadDim, uint32_t kStages, uint32_t kQColumns>
struct SmemLayout {
    static constexpr uint32_t kQBytes = kQColumns * kHeadDim;
    static constexpr uint32_t kKvBytes = kBlockKV * kHeadDim;
    static constexpr uint32_t kSfBytes = kBlockKV * 4;
    static constexpr uint32_t kKvOff = kQStages * kQBytes;
    static constexpr uint32_t kSfOff = kKvOff + kStages * kKvBytes;
    static constexpr uint32_t kWordOff = kSfOff + kStages * kSfBytes;
    static constexpr uint32_t kBarOff = kWordOff + kNumMathThreads * 4;
    static constexpr uint32_t kTotalBytes = kBarOff + (2 * kStages + 2 * kQStages) * 8;
    static constexpr uint32_t kDynamicBytes = kTotalBytes + 1024;
    static constexpr uint32_t kStageTxBytes = kKvBytes + kSfBytes;
    static_assert(kQBytes % 1024 == 0 && kKvBytes % 1024 == 0, "tiles keep 1024-byte alignment");
    static_assert(kDynamicBytes <= 232448, "shared memory over the 227 KB per-block limit");

    uint8_t* base;
    __device__ __forceinline__ explicit SmemLayout(uint8_t* raw)
        : base(raw + ((1024u - (ptx::smem_addr(raw) & 1023u)) & 1023u)) {}
    __device__ __forceinline__ uint8_t* q(uint32_t s) const { return base + s * kQBytes; }
    __device__ __forceinline__ uint8_t* kv(uint32_t s) const { return base + kKvOff + s * kKvBytes; }
    __device__ __forceinline__ float* sf(uint32_t s) const {
        return reinterpret_cast<float*>(base + kSfOff + s * kSfBytes);
    }
    __device__ __forceinline__ uint32_t* word(uint32_t t) const {
        return reinterpret_cast<uint32_t*>(base + kWordOff) + t;
    }
    __device__ __forceinline__ uint64_t* bar(uint32_t i) const { return reinterpret_cast<uint64_t*>(base + kBarOff) + i; }
    __device__ __forceinline__ uint64_t* full(uint32_t s) const { return bar(s); }
    __device__ __forceinline__ uint64_t* empty(uint32_t s) const { return bar(kStages + s); }
    __device__ __forceinline__ uint64_t* q_full(uint32_t s) const { return bar(2 * kStages + s); }
    __device__ __forceinline__ uint64_t* q_empty(uint32_t s) const { return bar(2 * kStages + kQStages + s); }
};

// wgmma descriptor of a K-major tile whose rows are kRowBytes (32, 64 or 128) long and
// swizzled by the same width, as the TMA writes it: 8-row groups 8 * kRowBytes apart.
template <uint32_t kRowBytes>
__device__ __forceinline__ uint64_t make_desc_k_major(const void* tile) {
    static_assert(kRowBytes == 32 || kRowBytes == 64 || kRowBytes == 128, "swizzle widths of the TMA");
    constexpr uint64_t kMode = kRowBytes == 128 ? 1 : kRowBytes == 64 ? 2 : 3;
    uint64_t desc = (ptx::smem_addr(tile) & 0x3FFFFull) >> 4;
    desc |= 1ull << 16;  // LBO: unused by swizzled K-major layouts
    desc |= static_cast<uint64_t>((8 * kRowBytes) >> 4) << 32;
    desc |= kMode << 62;
    return desc;
}

// The KV range a block of query tokens needs: the union of their windows (clamped to
// [0, S_kv]; empty windows and tokens past S left out), in kBlockKV blocks from kv_begin
// (the union's start rounded down to a multiple of 4).
struct QBlockWindow {
    uint32_t kv_begin, num_kv_blocks;
};

template <uint32_t kBlockQ>
__device__ __forceinline__ QBlockWindow q_block_window(const int* ks, const int* ke, uint32_t q0, uint32_t seq_len,
                                                      uint32_t seq_len_kv) {
    int lo = static_cast<int>(seq_len_kv), hi = 0;
#pragma unroll
    for (uint32_t t = 0; t < kBlockQ; ++t) {
        if (q0 + t >= seq_len) break;
        const int s = max(__ldg(ks + q0 + t), 0), e = min(__ldg(ke + q0 + t), static_cast<int>(seq_len_kv));
        if (e > s) lo = min(lo, s), hi = max(hi, e);
    }
    if (hi <= lo) return {0, 0};
    // The scales' TMA box must start 16 bytes aligned: the range starts at a multiple of 4 keys.
    const uint32_t begin = static_cast<uint32_t>(lo) & ~3u;
    return {begin, ceil_div(static_cast<uint32_t>(hi) - begin, kBlockKV)};
}

// The order in which a CTA takes its blocks of query tokens: from the last block back (the
// windows of causal and context-parallel prefill grow with the token index, so the costliest
// blocks go first and the last, partial round of the grid holds the cheapest), dealt in
// rounds of gridDim.x in snake order (odd rounds reversed, so the CTA that got the costlier
// block of one round gets the cheaper one of the next). The three roles of a CTA (TMA,
// -inf fill, math) walk the same sequence: `next` returns false past the CTA's last block.
struct QBlockOrder {
    uint32_t num_q_blocks, round = 0;
    __device__ __forceinline__ bool next(uint32_t& qb) {
        const uint32_t g = gridDim.x;
        const uint32_t pos = round * g + (round % 2 == 0 ? blockIdx.x : g - 1 - blockIdx.x);
        ++round;
        if (pos >= num_q_blocks) return false;  // pos only grows: this CTA is done
        qb = num_q_blocks - 1 - pos;
        return true;
    }
};

template <typename OutT>
__device__ __forceinline__ OutT to_out(float v) {
    if constexpr (sizeof(OutT) == 2) return __float2bfloat16_rn(v);
    else return v;
}

}  // namespace sm90_mqa

// kQColumns (kBlockQ * H, the wgmma's N): 128 with double-buffered accumulators, or 256 with one
// set (twice the FLOPs per shared-memory byte of Q and KV read, no overlap inside a warpgroup).
template <uint32_t kHeads, uint32_t kHeadDim, uint32_t kStages, typename OutT, bool kCompressed, bool kClean,
          uint32_t kQColumns = 128>
__device__ __forceinline__ void sm90_fp8_mqa_logits_impl(uint32_t seq_len, uint32_t seq_len_kv, uint32_t max_seqlen_k,
                                                         const int* ks, const int* ke, const float* weights,
                                                         uint32_t ld_weights, OutT* logits, uint64_t ld_logits,
                                                         const CUtensorMap* tmap_q, const CUtensorMap* tmap_kv,
                                                         const CUtensorMap* tmap_sf) {
    using namespace sm90;
    using namespace sm90_mqa;
    constexpr uint32_t kBlockQ = kQColumns / kHeads;
    using Reduce = epilogue::MqaHeadReduce<kHeads, kBlockQ>;
    using Layout = SmemLayout<kHeadDim, kStages, kQColumns>;
    static_assert(kQColumns == 128 || kQColumns == 256, "N of 128 or 256");
    using Mma = ptx::WgmmaE4M3<kQColumns>;
    static_assert(kQColumns % kHeads == 0 && kBlockQ >= 2 && kBlockQ <= 16, "H in {8, 16, 32, 64}");
    static_assert(kHeadDim == 32 || kHeadDim == 64 || kHeadDim == 128, "D in {32, 64, 128}");
    static_assert(!(kCompressed && kClean), "the compressed form is not cleaned");
    static_assert(register_budgets_fit(kNumMathThreads, kProducerRegs, kMathRegs), "setmaxnreg budgets over the entry allocation");
    static_assert(launch_smem_fits<Layout>(), "the launch allocates less shared memory than this layout");

    extern __shared__ uint8_t smem_raw[];
    const Layout smem(smem_raw);
    if (threadIdx.x == kNumMathThreads) {
        for (uint32_t s = 0; s < kQStages; ++s) {
            ptx::mbar_init(smem.q_full(s), 1);
            ptx::mbar_init(smem.q_empty(s), kNumMathWG * 4);
        }
    }
    gemm_kernel_setup<Layout, kStages, kNumMathWG * 4, 1>(smem, kNumMathThreads, tmap_q, tmap_kv, tmap_sf);

    const uint32_t num_q_blocks = ceil_div(seq_len, kBlockQ);
    if (threadIdx.x >= kNumMathThreads) {
        ptx::setmaxnreg_dec<kProducerRegs>();
        const uint32_t pt = threadIdx.x - kNumMathThreads;
        if (pt == 0) {
            // ---- TMA: Q once per block of tokens, then the KV blocks of its range ----
            PipeState<kStages> pipe;
            uint32_t qi = 0;
            QBlockOrder order{num_q_blocks};
            for (uint32_t qb; order.next(qb);) {
                const QBlockWindow win = q_block_window<kBlockQ>(ks, ke, qb * kBlockQ, seq_len, seq_len_kv);
                if (win.num_kv_blocks == 0) continue;
                const uint32_t qs = qi % kQStages;
                ptx::mbar_wait_watchdog(smem.q_empty(qs), ((qi / kQStages) & 1u) ^ 1u);
                ptx::mbar_arrive_expect_tx(smem.q_full(qs), Layout::kQBytes);
                ptx::tma_load_2d(smem.q(qs), tmap_q, smem.q_full(qs), 0, static_cast<int32_t>(qb * kQColumns));
                ++qi;
                for (uint32_t b = 0; b < win.num_kv_blocks; ++b, pipe.advance()) {
                    const uint32_t s = pipe.stage;
                    ptx::mbar_wait_watchdog(smem.empty(s), pipe.phase ^ 1u);
                    ptx::mbar_arrive_expect_tx(smem.full(s), Layout::kStageTxBytes);
                    const int32_t row = static_cast<int32_t>(win.kv_begin + b * kBlockKV);
                    ptx::tma_load_2d(smem.kv(s), tmap_kv, smem.full(s), 0, row);
                    ptx::tma_load_2d(smem.sf(s), tmap_sf, smem.full(s), row, 0);
                }
            }
        } else if (pt >= 32) {
            if constexpr (kClean) {
                // ---- -inf outside the CTA's KV range (inside it the math warpgroups write) ----
                const uint32_t ft = pt - 32;
                constexpr uint32_t kFillThreads = 96;
                const OutT neg_inf = to_out<OutT>(-__int_as_float(0x7f800000));
                QBlockOrder order{num_q_blocks};
                for (uint32_t qb; order.next(qb);) {
                    const QBlockWindow win = q_block_window<kBlockQ>(ks, ke, qb * kBlockQ, seq_len, seq_len_kv);
                    const uint32_t lo = win.num_kv_blocks ? win.kv_begin : seq_len_kv;
                    const uint32_t hi = min(win.kv_begin + win.num_kv_blocks * kBlockKV, seq_len_kv);
                    for (uint32_t t = 0; t < kBlockQ && qb * kBlockQ + t < seq_len; ++t) {
                        OutT* row = logits + static_cast<uint64_t>(qb * kBlockQ + t) * ld_logits;
                        for (uint32_t c = ft; c < lo; c += kFillThreads) row[c] = neg_inf;
                        if (win.num_kv_blocks)
                            for (uint32_t c = hi + ft; c < seq_len_kv; c += kFillThreads) row[c] = neg_inf;
                    }
                }
            }
        }
        __syncwarp();
    } else {
        // ---- math warpgroups ----
        ptx::setmaxnreg_inc<kMathRegs>();
        const MathThread me = math_thread();
        const uint32_t wg = me.wg, warp = me.warp, lane = me.lane;
        const uint64_t desc_a0 = make_desc_k_major<kHeadDim>(smem.kv(0) + wg * 64 * kHeadDim);
        const uint64_t desc_b0 = make_desc_k_major<kHeadDim>(smem.q(0));
        const uint32_t row_lo = 16 * warp + lane / 4;
        PipeState<kStages> pipe;
        uint32_t qi = 0;
        constexpr bool kDoubleBuffer = kQColumns <= 128;
        float acc0[Mma::kNumAccum], acc1[kDoubleBuffer ? Mma::kNumAccum : 1];
        float wr[Reduce::kNumWeights];

        QBlockOrder order{num_q_blocks};
        for (uint32_t qb; order.next(qb);) {
            const uint32_t q0 = qb * kBlockQ;
            const QBlockWindow win = q_block_window<kBlockQ>(ks, ke, q0, seq_len, seq_len_kv);
            if (win.num_kv_blocks == 0) continue;
            const uint32_t num_tokens = min(kBlockQ, seq_len - q0);
            Reduce::load_weights(weights + static_cast<uint64_t>(q0) * ld_weights, ld_weights, num_tokens, lane, wr);
            // The windows of the tokens this lane stores (an empty one for tokens past S).
            int win_lo[Reduce::kOutPerLane], win_hi[Reduce::kOutPerLane];
#pragma unroll
            for (uint32_t i = 0; i < Reduce::kOutPerLane; ++i) {
                const uint32_t t = Reduce::out_token(i, lane);
                const bool valid = t < num_tokens;
                win_lo[i] = valid ? max(__ldg(ks + q0 + t), 0) : 0;
                win_hi[i] = valid ? min(__ldg(ke + q0 + t), static_cast<int>(seq_len_kv)) : 0;
            }
            const uint32_t qs = qi % kQStages;
            ptx::mbar_wait_uniform(smem.q_full(qs), (qi / kQStages) & 1u);
            ++qi;
            const uint64_t desc_b = ptx::desc_advance(desc_b0, qs * Layout::kQBytes);

            // Issue block `b`'s wgmmas (stage pipe) into acc.
            const auto issue = [&](float (&acc)[Mma::kNumAccum], uint32_t s) {
                const uint64_t desc_a = ptx::desc_advance(desc_a0, s * Layout::kKvBytes);
                ptx::mbar_wait_uniform(smem.full(s), pipe.phase);
                ptx::fence_operands(acc);
                ptx::wgmma_fence();
#pragma unroll
                for (uint32_t k = 0; k < kHeadDim / 32; ++k)
                    Mma::mma(ptx::desc_advance(desc_a, k * 32), ptx::desc_advance(desc_b, k * 32), acc, k > 0);
                ptx::wgmma_commit();
            };
            // Reduce and store block b (stage s) from acc, once its wgmmas are done.
            const auto finish = [&](float (&acc)[Mma::kNumAccum], uint32_t s, uint32_t b) {
                const float sf_lo = smem.sf(s)[wg * 64 + row_lo];
                const float sf_hi = smem.sf(s)[wg * 64 + row_lo + 8];
                ptx::fence_operands(acc);
                release_stage_after_reads<1>(smem.empty(s), smem.word(threadIdx.x), bits_of(sf_lo, sf_hi), lane, true);
                float out[Reduce::kOutPerLane];
                Reduce::reduce(acc, wr, sf_lo, sf_hi, lane, out);
                const uint32_t kv0 = win.kv_begin + b * kBlockKV + wg * 64;
#pragma unroll
                for (uint32_t i = 0; i < Reduce::kOutPerLane; ++i) {
                    const uint32_t t = Reduce::out_token(i, lane);
                    const int kv = static_cast<int>(kv0 + Reduce::out_row(i, warp, lane));
                    const bool inside = kv >= win_lo[i] && kv < win_hi[i];
                    OutT* row = logits + static_cast<uint64_t>(q0 + t) * ld_logits;
                    if constexpr (kCompressed) {
                        const uint32_t c = static_cast<uint32_t>(kv - win_lo[i]);
                        if (inside && c < max_seqlen_k) row[c] = to_out<OutT>(out[i]);
                    } else if constexpr (kClean) {
                        if (t < num_tokens && kv < static_cast<int>(seq_len_kv))
                            row[kv] = to_out<OutT>(inside ? out[i] : -__int_as_float(0x7f800000));
                    } else {
                        if (inside) row[kv] = to_out<OutT>(out[i]);
                    }
                }
            };

            // Two accumulator sets: block b + 1's wgmmas run while block b is reduced
            // (wait_group 1 leaves exactly them in flight). The loop body and the tail have no
            // branch between an issue and its wait, so ptxas can see that no accumulator is
            // touched while its wgmmas run (a conditional issue made it serialise every wgmma).
            const uint32_t n = win.num_kv_blocks;
            if constexpr (!kDoubleBuffer) {
                for (uint32_t b = 0; b < n; ++b) {
                    const uint32_t s0 = pipe.stage;
                    issue(acc0, s0);
                    pipe.advance();
                    ptx::wgmma_wait<0>();
                    finish(acc0, s0, b);
                }
            } else {
                uint32_t s0 = pipe.stage, b = 0;
                issue(acc0, s0);
                pipe.advance();
                for (; b + 2 < n; b += 2) {
                    const uint32_t s1 = pipe.stage;
                    issue(acc1, s1);
                    pipe.advance();
                    ptx::wgmma_wait<1>();
                    finish(acc0, s0, b);
                    s0 = pipe.stage;
                    issue(acc0, s0);
                    pipe.advance();
                    ptx::wgmma_wait<1>();
                    finish(acc1, s1, b + 1);
                }
                if (b + 1 < n) {
                    const uint32_t s1 = pipe.stage;
                    issue(acc1, s1);
                    pipe.advance();
                    ptx::wgmma_wait<1>();
                    finish(acc0, s0, b);
                    ptx::wgmma_wait<0>();
                    finish(acc1, s1, b + 1);
                } else {
                    ptx::wgmma_wait<0>();
                    finish(acc0, s0, b);
                }
            }
            // Every wgmma reading this Q stage is complete (the last wait was wait_group 0).
            if (lane == 0) ptx::mbar_arrive(smem.q_empty(qs));
        }
    }
}

}  // namespace deep_gemm
