// The schedule of the paged MQA logits (the V3.2 indexer's decode step): how the work of a
// batch of sequences is cut into tiles of kTileKV cached tokens and spread evenly over the
// CTAs of the persistent logits kernel (impls/sm90_fp8_paged_mqa_logits.cuh), so that one
// long sequence is shared by many SMs instead of serialising on one.
//
// Batch b's queries read the first len_b cached tokens, len_b = the longest window of its
// next_n query tokens (token_kv_len below): tiles_b = ceil(len_b / kTileKV). The tiles of
// all batches, in order (b, then tile index), form one sequence of total = sum(tiles_b)
// units; CTA i takes units [start(i), start(i + 1)) with start(i) = i * q + min(i, r),
// q = total / G, r = total % G (G CTAs: the first r take one more). The kernel walks its
// units in items of up to kSplitKV tokens; dealing tiles rather than whole items keeps the
// CTAs' shares within one tile of each other (the memory-bound kernel's time is its largest
// share: 64 batches of 32768 tokens over 132 CTAs deal 62 or 63 items of 256 tokens, 1.5%
// over the mean, against 248 or 249 tiles, 0.3%).
//
// schedule_meta int32 [G + 1][2]: row i = (b, t), the batch and tile index of unit start(i)
// (b = batch_size, t = 0 where start(i) == total, so row G is always (batch_size, 0)). CTA i
// walks from row i to row i + 1 (exclusive). The metadata kernel reads context_lens on the
// GPU only: a captured CUDA graph recomputes it for new lengths on replay.
#pragma once

#include <deep_gemm/common/stdint.cuh>

namespace deep_gemm {

namespace paged_mqa {

constexpr uint32_t kTileKV = 64;          // cached tokens per schedule unit (the kernel's tile)
constexpr uint32_t kSplitKV = 256;        // cached tokens per item of the kernel's walk, at most
constexpr uint32_t kMetaThreads = 1024;   // blockDim.x of the metadata kernel (one block)

// The cached tokens query token t of batch b may see (its keys are j < this), >= 0.
//   1-D context_lens [B]: the batch's length is that of its last token; token t sees
//     j < len - next_n + t + 1 (the causal window of the next_n speculative tokens).
//   2-D context_lens [B, next_n]: each token has its own length.
__device__ __forceinline__ uint32_t token_kv_len(const int* context_lens, uint32_t b, uint32_t t, uint32_t next_n,
                                                 bool lens_2d) {
    const int64_t len = lens_2d ? int64_t(__ldg(context_lens + uint64_t(b) * next_n + t))
                                : int64_t(__ldg(context_lens + b)) - next_n + t + 1;
    return len > 0 ? uint32_t(len) : 0u;
}

// The cached tokens batch b reads: the longest of its tokens' windows.
__device__ __forceinline__ uint32_t batch_kv_len(const int* context_lens, uint32_t b, uint32_t next_n, bool lens_2d) {
    if (!lens_2d) return token_kv_len(context_lens, b, next_n - 1, next_n, false);
    uint32_t len = 0;
    for (uint32_t t = 0; t < next_n; ++t) len = max(len, token_kv_len(context_lens, b, t, next_n, true));
    return len;
}

__device__ __forceinline__ uint32_t num_tiles(uint32_t kv_len) { return (kv_len + kTileKV - 1) / kTileKV; }

// start(i) of the schedule (see the top of this file).
__device__ __forceinline__ uint64_t unit_start(uint64_t i, uint64_t q, uint64_t r) { return i * q + min(i, r); }

// The smallest CTA index i with start(i) >= x (x <= total).
__device__ __forceinline__ uint64_t first_cta_at(uint64_t x, uint64_t q, uint64_t r) {
    const uint64_t wide = r * (q + 1);  // the units of the first r CTAs (q + 1 each)
    if (x <= wide) return (x + q) / (q + 1);
    return r + (x - wide + q - 1) / q;  // q >= 1 here: otherwise wide == total >= x
}

// Inclusive sum over the block (kMetaThreads threads) of `v`; `total` gets the block's sum.
__device__ __forceinline__ uint64_t block_inclusive_scan(uint64_t v, uint64_t* warp_sums, uint64_t& total) {
    const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
    for (uint32_t d = 1; d < 32; d <<= 1) {
        const uint64_t o = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += o;
    }
    if (lane == 31) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        uint64_t w = lane < kMetaThreads / 32 ? warp_sums[lane] : 0;
#pragma unroll
        for (uint32_t d = 1; d < 32; d <<= 1) {
            const uint64_t o = __shfl_up_sync(0xffffffffu, w, d);
            if (lane >= d) w += o;
        }
        warp_sums[lane] = w;  // inclusive prefix of the warp totals
    }
    __syncthreads();
    const uint64_t before = warp == 0 ? 0 : warp_sums[warp - 1];
    total = warp_sums[kMetaThreads / 32 - 1];
    __syncthreads();  // warp_sums is reused by the next call
    return v + before;
}

}  // namespace paged_mqa

// One block of paged_mqa::kMetaThreads threads; schedule_meta int32 [num_ctas + 1][2].
// Two passes over context_lens (the total first, then each batch's place in it); every row
// is written exactly once, by the thread of the batch holding its start item (or as the
// end mark). Work O(batch_size + num_ctas), no shared memory beyond the scan's.
__device__ __forceinline__ void paged_mqa_logits_metadata_impl(const int* context_lens, uint32_t batch_size,
                                                               uint32_t next_n, bool lens_2d, uint32_t num_ctas,
                                                               int* schedule_meta) {
    using namespace paged_mqa;
    __shared__ uint64_t warp_sums[32];
    const uint32_t tid = threadIdx.x;

    uint64_t total = 0;
    for (uint32_t b0 = 0; b0 < batch_size; b0 += kMetaThreads) {
        const uint32_t b = b0 + tid;
        const uint64_t n = b < batch_size ? num_tiles(batch_kv_len(context_lens, b, next_n, lens_2d)) : 0;
        uint64_t chunk = 0;
        block_inclusive_scan(n, warp_sums, chunk);
        total += chunk;
    }
    const uint64_t q = total / num_ctas, r = total % num_ctas;

    uint64_t carry = 0;  // units of the batches before this chunk
    for (uint32_t b0 = 0; b0 < batch_size; b0 += kMetaThreads) {
        const uint32_t b = b0 + tid;
        const uint64_t n = b < batch_size ? num_tiles(batch_kv_len(context_lens, b, next_n, lens_2d)) : 0;
        uint64_t chunk = 0;
        const uint64_t hi = carry + block_inclusive_scan(n, warp_sums, chunk);
        const uint64_t lo = hi - n;  // batch b holds units [lo, hi)
        if (n > 0) {
            for (uint64_t i = first_cta_at(lo, q, r); i < num_ctas; ++i) {
                const uint64_t start = unit_start(i, q, r);
                if (start >= hi) break;
                schedule_meta[2 * i] = int(b);
                schedule_meta[2 * i + 1] = int(start - lo);
            }
        }
        carry += chunk;
    }
    // The CTAs that start at the end (no work, or the end mark of the last CTA).
    for (uint64_t i = first_cta_at(total, q, r) + tid; i <= num_ctas; i += kMetaThreads) {
        schedule_meta[2 * i] = int(batch_size);
        schedule_meta[2 * i + 1] = 0;
    }
}

}  // namespace deep_gemm
