// SM90 paged MQA logits (the DeepSeek V3.2 indexer, decode): for query token t of batch b
// (next_n tokens per batch, H heads, head dim D) and each cached token j it may see,
//
//   logits[b * next_n + t][j] = sum_h relu(q[b, t, h] . k_j * s_j) * w[b * next_n + t][h]
//
// with k_j the FP8 row and s_j the FP32 scale of token j, found through block_table: token j
// of batch b lives in page block_table[b][j / block_kv], row j % block_kv. A page of the
// uint8 cache [num_blocks, block_kv, 1, D + 4] holds its block_kv FP8 rows of D bytes, then
// its block_kv FP32 scales (a page is block-strided: kv_stride bytes apart).
//
// Memory-bound at next_n = 1: each cached token is read once (D + 4 bytes) for 2 * H * D
// flops per query token. The schedule (impls/paged_mqa_logits_metadata.cuh) deals the 64-token
// tiles evenly over the CTAs; a CTA walks its tiles in items (splits) of up to 256 tokens of one
// batch. Per split, the tiles stream
// through the shared TMA ring (one 3-D box per page: KV rows, one 2-D box: scales), and one
// wgmma m64nNk32 chain per tile puts the 64 tokens on M and the query rows (token, head) on
// N, q resident per batch. The head reduction is the shared epilogue
// (epilogue/sm90_mqa_logits_reduce.cuh), along N in registers. It takes one token or pairs,
// so next_n = 3 computes a fourth (the next batch's q rows, or the TMA's zeros past the last
// batch, with weights 0) and does not store it.
//
// Block: two math warpgroups, then the producer warpgroup (its first warp: lane 0 issues the
// TMA loads, all 32 lanes read the block-table entries of the splits 4 items ahead). The math
// warpgroups take a CTA's splits in turn (even ones: warpgroup 0), each through its own half
// of the stage ring. (One ring whose stages a warpgroup skipped when they held the other's
// split let a warpgroup wait for a stage's next phase before the previous one had completed:
// the parity wait then passed at once, on data not yet there, and the launch failed or hung,
// now and then, at long contexts: seen on an H100 on 2026-12-07.) Each has two q slots,
// loaded by the producer when its batch changes (the next batch's while the current one's
// tiles are computed), and its batch's weights in registers.
#pragma once
#include <cuda_bf16.h>
#include <deep_gemm/common/sm90_pipeline.cuh>
#include <deep_gemm/epilogue/sm90_mqa_logits_reduce.cuh>
#include <deep_gemm/impls/paged_mqa_logits_metadata.cuh>
#include <deep_gemm/mma/wgmma_e4m3.cuh>
#include <deep_gemm/ptx/wgmma.cuh>

namespace deep_gemm {

namespace sm90_paged_mqa {

constexpr uint32_t kTileKV = paged_mqa::kTileKV;  // cached tokens per pipeline stage: M of the wgmma
constexpr uint32_t kTilesPerSplit = paged_mqa::kSplitKV / kTileKV;
constexpr uint32_t kNumMathWG = 2;
constexpr uint32_t kQSlots = 2;           // q slots per math warpgroup: the next batch's q loads early
constexpr uint32_t kPagePrefetch = 4;     // items whose block-table entries the producer reads ahead
// setmaxnreg budgets: the producer walks two item sequences and holds kPagePrefetch table
// slots, more than the GEMMs' 40-register producer holds without spilling; the math
// warpgroups' widest case (N = 256: 128 accumulators, 64 weights) fits in 224.
constexpr uint32_t kProducerRegs = 56;
constexpr uint32_t kMathRegs = 224;
constexpr uint32_t kCleanThreads = 256;   // blockDim.x of the clean kernel
constexpr uint32_t kCleanChunk = 4096;    // logits columns per clean block (grid.y)

// wgmma descriptor of a K-major FP8 tile of kRowBytes-byte rows, stored with the swizzle of
// the same width (as the TMA wrote it): 8-row core groups 8 * kRowBytes apart (SBO).
// Swizzle mode field: 1 = 128B, 2 = 64B, 3 = 32B.
template <uint32_t kRowBytes>
__device__ __forceinline__ uint64_t make_desc_k_major(const void* tile) {
    static_assert(kRowBytes == 32 || kRowBytes == 64 || kRowBytes == 128, "rows of 32, 64 or 128 bytes");
    if constexpr (kRowBytes == 128) {
        return ptx::make_smem_desc_sw128(tile);
    } else {
        uint64_t desc = (ptx::smem_addr(tile) & 0x3FFFFull) >> 4;
        desc |= static_cast<uint64_t>((8 * kRowBytes) >> 4) << 32;
        desc |= static_cast<uint64_t>(kRowBytes == 64 ? 2 : 3) << 62;
        return desc;
    }
}

// The query tokens of one wgmma: 1, or next_n rounded up to even (MqaHeadReduce takes one or pairs).
constexpr uint32_t padded_tokens(uint32_t next_n) { return next_n == 1 ? 1 : next_n + next_n % 2; }

// Dynamic shared memory from a 1024-byte aligned base:
//   [q slot x 2 per math warpgroup] [KV tile x kStages] [scales x kStages] [scratch word per
//   math thread] [full, empty x kStages] [q_full, q_empty x 2 per math warpgroup]
// The host mirrors this in its shared-memory count (sm90_paged_mqa_logits.hpp).
template <uint32_t kNextN, uint32_t kHeads, uint32_t kHeadDim, uint32_t kStages>
struct SmemLayout {
    static constexpr uint32_t kN = padded_tokens(kNextN) * kHeads;  // query rows (token-major, then head)
    static constexpr uint32_t kQBytes = kN * kHeadDim;
    static constexpr uint32_t kKVBytes = kTileKV * kHeadDim;
    static constexpr uint32_t kSFBytes = kTileKV * 4;
    static constexpr uint32_t kQOff = 0;
    static constexpr uint32_t kKVOff = kQOff + kNumMathWG * kQSlots * kQBytes;
    static constexpr uint32_t kSFOff = kKVOff + kStages * kKVBytes;
    static constexpr uint32_t kScratchOff = kSFOff + kStages * kSFBytes;
    static constexpr uint32_t kBarOff = kScratchOff + kNumMathWG * 128 * 4;
    static constexpr uint32_t kTotalBytes = kBarOff + (2 * kStages + 2 * kNumMathWG * kQSlots) * 8;
    static constexpr uint32_t kDynamicBytes = kTotalBytes + 1024;  // room to align the base
    static constexpr uint32_t kStageTxBytes = kKVBytes + kSFBytes;
    static_assert(kQBytes % 1024 == 0 && kKVBytes % 1024 == 0, "swizzled tiles keep 1024-byte alignment");
    static_assert(kSFBytes % 128 == 0, "TMA destinations are 128-byte aligned");
    static_assert(kDynamicBytes <= 232448, "shared memory over the 227 KB per-block limit");

    uint8_t* base;
    __device__ __forceinline__ explicit SmemLayout(uint8_t* raw)
        : base(raw + ((1024u - (ptx::smem_addr(raw) & 1023u)) & 1023u)) {}
    __device__ __forceinline__ uint8_t* q(uint32_t wg, uint32_t i) const {
        return base + kQOff + (wg * kQSlots + i) * kQBytes;
    }
    __device__ __forceinline__ uint8_t* kv(uint32_t s) const { return base + kKVOff + s * kKVBytes; }
    __device__ __forceinline__ float* sf(uint32_t s) const {
        return reinterpret_cast<float*>(base + kSFOff + s * kSFBytes);
    }
    __device__ __forceinline__ uint32_t* scratch() const { return reinterpret_cast<uint32_t*>(base + kScratchOff); }
    __device__ __forceinline__ uint64_t* bar(uint32_t i) const { return reinterpret_cast<uint64_t*>(base + kBarOff) + i; }
    __device__ __forceinline__ uint64_t* full(uint32_t s) const { return bar(s); }
    __device__ __forceinline__ uint64_t* empty(uint32_t s) const { return bar(kStages + s); }
    __device__ __forceinline__ uint64_t* q_full(uint32_t wg, uint32_t i) const {
        return bar(2 * kStages + wg * kQSlots + i);
    }
    __device__ __forceinline__ uint64_t* q_empty(uint32_t wg, uint32_t i) const {
        return bar(2 * kStages + (kNumMathWG + wg) * kQSlots + i);
    }
};

// One item of a CTA's walk: tiles [t, t + n) of batch b (n <= kTilesPerSplit; tile i holds
// tokens [64 i, 64 i + 64) clipped to len, the batch's longest window).
struct Split {
    uint32_t b, t, n, len;
};

// Walks the items of one CTA, from its schedule row to the next (exclusive). Whatever
// schedule_meta holds, it ends: it never passes batch_size, nor a batch's last split.
class SplitWalker {
   public:
    __device__ __forceinline__ SplitWalker(const int* context_lens, uint32_t batch_size, uint32_t next_n, bool lens_2d,
                                           const int* schedule_meta, uint32_t cta)
        : ctx_(context_lens), batch_(batch_size), next_n_(next_n), lens_2d_(lens_2d) {
        // Negative entries become huge: past the end.
        b_ = static_cast<uint32_t>(__ldg(schedule_meta + 2 * cta));
        t_ = static_cast<uint32_t>(__ldg(schedule_meta + 2 * cta + 1));
        end_b_ = static_cast<uint32_t>(__ldg(schedule_meta + 2 * cta + 2));
        end_t_ = static_cast<uint32_t>(__ldg(schedule_meta + 2 * cta + 3));
    }

    // Where the walk starts, as the schedule says (read before any context length).
    __device__ __forceinline__ uint32_t start_batch() const { return b_; }
    __device__ __forceinline__ uint32_t start_tile() const { return t_; }

    __device__ __forceinline__ bool next(Split& out) {
        while (b_ < batch_ && (b_ < end_b_ || (b_ == end_b_ && t_ < end_t_))) {
            if (!loaded_) {
                len_ = paged_mqa::batch_kv_len(ctx_, b_, next_n_, lens_2d_);
                tiles_ = paged_mqa::num_tiles(len_);
                loaded_ = true;
            }
            if (t_ < tiles_) {  // then t_ + kTilesPerSplit cannot wrap
                const uint32_t end = b_ == end_b_ ? min(tiles_, end_t_) : tiles_;
                const uint32_t n = min(kTilesPerSplit, end - t_);
                out = {b_, t_, n, len_};
                t_ += n;
                return true;
            }
            ++b_;
            t_ = 0;
            loaded_ = false;
        }
        return false;
    }

   private:
    const int* ctx_;
    uint32_t batch_, next_n_;
    bool lens_2d_;
    uint32_t b_, t_, end_b_, end_t_;
    uint32_t len_ = 0, tiles_ = 0;
    bool loaded_ = false;
};

template <typename OutT>
__device__ __forceinline__ OutT to_out(float v) {
    if constexpr (sizeof(OutT) == 2) return __float2bfloat16_rn(v);
    else return v;
}

}  // namespace sm90_paged_mqa

// kNextN query tokens per batch (1..4), kHeads (32, 64), kHeadDim (32, 64, 128): the wgmma
// is m64 x (padded_tokens(kNextN) * kHeads) x 32. OutT: float or __nv_bfloat16.
//   q [B * kNextN * kHeads][kHeadDim] e4m3 (tmap_q: box kHeadDim x N rows, swizzle kHeadDim
//   bytes); KV rows (tmap_kv, rank 3 [num_kv_blocks][block_kv][kHeadDim], box 1 page); scales
//   (tmap_sf, [num_kv_blocks][block_kv] fp32, box 1 page); weights [B * kNextN][kHeads] fp32,
//   row pitch weights_stride (elements).
//   block_table [B][>= max_blocks] int32 (row pitch block_table_stride); an entry out of
//   [0, num_kv_blocks), or a page past max_blocks, reads as zeros (TMA out-of-bounds fill).
//   logits: row b * kNextN + t, column j, pitch logits_stride; only cells j < min(len_t,
//   max_context_len) are written.
template <uint32_t kNextN, uint32_t kHeads, uint32_t kHeadDim, uint32_t kStages, typename OutT>
__device__ __forceinline__ void sm90_fp8_paged_mqa_logits_impl(
    uint32_t batch_size, uint32_t block_kv, uint32_t num_kv_blocks, bool lens_2d, const int* context_lens,
    const int* block_table, uint64_t block_table_stride, uint32_t max_blocks, const int* schedule_meta,
    const float* weights, uint64_t weights_stride, OutT* logits, uint64_t logits_stride, uint32_t max_context_len,
    const CUtensorMap* tmap_q, const CUtensorMap* tmap_kv, const CUtensorMap* tmap_sf) {
    using namespace sm90;
    using namespace sm90_paged_mqa;
    using Layout = SmemLayout<kNextN, kHeads, kHeadDim, kStages>;
    constexpr uint32_t kTokens = padded_tokens(kNextN);
    constexpr uint32_t kN = Layout::kN;
    constexpr uint32_t kNumMathThreads = kNumMathWG * 128;
    static_assert(kNextN >= 1 && kNextN <= 4, "next_n in [1, 4]");
    static_assert(kStages % kNumMathWG == 0, "each math warpgroup owns kStages / kNumMathWG stages");
    constexpr uint32_t kRingStages = kStages / kNumMathWG;
    static_assert(kHeads == 32 || kHeads == 64, "32 or 64 heads");
    static_assert(register_budgets_fit(kNumMathThreads, sm90_paged_mqa::kProducerRegs, sm90_paged_mqa::kMathRegs),
                  "setmaxnreg budgets over the entry allocation");
    static_assert(launch_smem_fits<Layout>(), "the launch allocates less shared memory than this layout");
    using Mma = ptx::WgmmaE4M3<kN>;
    using Reduce = epilogue::MqaHeadReduce<kHeads, kTokens>;

    extern __shared__ uint8_t smem_raw[];
    const Layout smem(smem_raw);
    if (threadIdx.x == kNumMathThreads) {
        for (uint32_t wg = 0; wg < kNumMathWG; ++wg) {
            for (uint32_t i = 0; i < kQSlots; ++i) {
                ptx::mbar_init(smem.q_full(wg, i), 1);
                ptx::mbar_init(smem.q_empty(wg, i), 4);  // one arrival per warp of the warpgroup
            }
        }
    }
    // A stage is consumed by one math warpgroup: 4 arrivals free it.
    gemm_kernel_setup<Layout, kStages, 4, 1>(smem, kNumMathThreads, tmap_q, tmap_kv, tmap_sf);
    SplitWalker walker(context_lens, batch_size, kNextN, lens_2d, schedule_meta, blockIdx.x);

    if (threadIdx.x >= kNumMathThreads) {
        // ---- producer: the first warp of the last warpgroup ----
        ptx::setmaxnreg_dec<sm90_paged_mqa::kProducerRegs>();
        if (threadIdx.x / 32 != kNumMathThreads / 32) return;
        const uint32_t lane = threadIdx.x % 32;
        const uint32_t pages_per_tile = kTileKV / block_kv;  // 1 (block_kv 64) or 2 (32)
        // Lane i reads the block-table entry of page i of an item (-1: no page there), for the
        // item kPagePrefetch items ahead of the one whose boxes it issues: the table is read
        // from DRAM (cold), and one item's boxes take less time to issue than a loaded DRAM
        // round trip, so a table read one item ahead capped the issue rate at one item per
        // round trip. `ahead` walks the same items as `walker`, kPagePrefetch of them earlier.
        const auto load_pages = [&](uint32_t b, uint32_t t, uint32_t n, uint32_t len) -> int {
            const uint32_t page = t * pages_per_tile + lane;
            const bool valid = b < batch_size && lane < n * pages_per_tile && page < max_blocks &&
                               page * block_kv < len;
            return valid ? __ldg(block_table + b * block_table_stride + page) : -1;
        };
        SplitWalker ahead = walker;
        // The first item's table entries are read at once, in parallel with its batch's context
        // length, not after it: one DRAM round trip less before the CTA's first KV box. Pages
        // past the length in its last tile may then be read (rows whose logits are not stored).
        const Split walker_start{walker.start_batch(), walker.start_tile(), 0, 0};
        const auto fetch = [&](int& slot) {
            Split x{};
            slot = ahead.next(x) ? load_pages(x.b, x.t, x.n, x.len) : -1;
        };
        uint32_t ring_tiles0 = 0, ring_tiles1 = 0;  // tiles issued into warpgroup 0's ring (stages [0, kRingStages)), 1's
        uint32_t q_loads[kNumMathWG] = {0, 0};
        uint32_t q_batch[kNumMathWG] = {~0u, ~0u};
        uint32_t item = 0;
        // One item: its q (when its warpgroup's batch changes) and its tiles; `slot` holds its
        // block-table entries and is refilled with those of the item kPagePrefetch later.
        const auto step = [&](int& slot) -> bool {
            Split cur{};
            if (!walker.next(cur)) return false;
            int pages = slot;  // waits for this lane's table read, issued kPagePrefetch items ago
            // The first item's entries were read where the schedule starts, before its length
            // was known (below); a schedule made for other lengths may start elsewhere.
            if (item == 0 && (cur.b != walker_start.b || cur.t != walker_start.t))
                pages = load_pages(cur.b, cur.t, cur.n, cur.len);
            fetch(slot);
            const uint32_t wg = item % kNumMathWG;
#pragma unroll
            for (uint32_t g = 0; g < kNumMathWG; ++g) {  // constant indices: q_loads stays in registers
                if (g != wg || q_batch[g] == cur.b) continue;
                if (lane == 0) {
                    const uint32_t i = q_loads[g] % kQSlots;
                    ptx::mbar_wait_watchdog(smem.q_empty(g, i), ((q_loads[g] / kQSlots) & 1u) ^ 1u);
                    ptx::mbar_arrive_expect_tx(smem.q_full(g, i), Layout::kQBytes);
                    ptx::tma_load_2d(smem.q(g, i), tmap_q, smem.q_full(g, i), 0,
                                     static_cast<int32_t>(cur.b * kNextN * kHeads));
                }
                ++q_loads[g];
                q_batch[g] = cur.b;
            }
            // Values, not a reference to one of two states: both stay in registers.
            uint32_t issued = wg == 0 ? ring_tiles0 : ring_tiles1;
            const uint32_t ring = wg * kRingStages;
            for (uint32_t t = 0; t < cur.n; ++t, ++issued) {
                const PipeState<kRingStages> pipe{issued % kRingStages, (issued / kRingStages) & 1u};
                for (uint32_t p = 0; p < pages_per_tile; ++p) {
                    const int entry = __shfl_sync(0xffffffffu, pages, t * pages_per_tile + p);
                    // Outside the cache (or no page): a box past the last block, read as zeros.
                    const int32_t blk = static_cast<uint32_t>(entry) < num_kv_blocks ? entry
                                                                                     : static_cast<int32_t>(num_kv_blocks);
                    if (lane == 0) {
                        const uint32_t s = ring + pipe.stage;
                        if (p == 0) {
                            ptx::mbar_wait_watchdog(smem.empty(s), pipe.phase ^ 1u);
                            ptx::mbar_arrive_expect_tx(smem.full(s), Layout::kStageTxBytes);
                        }
                        ptx::tma_load_3d(smem.kv(s) + p * block_kv * kHeadDim, tmap_kv, smem.full(s), 0, 0, blk);
                        ptx::tma_load_2d(smem.sf(s) + p * block_kv, tmap_sf, smem.full(s), 0, blk);
                    }
                }
            }
            if (wg == 0) ring_tiles0 = issued;
            else ring_tiles1 = issued;
            ++item;
            return true;
        };
        // kPagePrefetch slots in registers, each used by every kPagePrefetch-th item: the loop
        // is unrolled over them so that every slot has a constant index.
        static_assert(kPagePrefetch == 4, "the loop below names the four slots");
        int slot0 = load_pages(walker_start.b, walker_start.t, kTilesPerSplit, ~0u), slot1, slot2, slot3;
        {
            Split first{};
            ahead.next(first);
        }
        fetch(slot1);
        fetch(slot2);
        fetch(slot3);
        while (step(slot0) && step(slot1) && step(slot2) && step(slot3)) {}
    } else {
        // ---- math warpgroups ----
        ptx::setmaxnreg_inc<sm90_paged_mqa::kMathRegs>();
        const MathThread me = math_thread();
        const uint32_t wg = me.wg, warp = me.warp, lane = me.lane;
        const uint32_t row = warp * 16 + lane / 4;  // this thread's scale rows: row, row + 8
        const uint64_t desc_q0 = sm90_paged_mqa::make_desc_k_major<kHeadDim>(smem.q(wg, 0));
        uint64_t desc_q = desc_q0;
        const uint64_t desc_kv0 = sm90_paged_mqa::make_desc_k_major<kHeadDim>(smem.kv(0));
        PipeState<kRingStages> pipe;  // this warpgroup's half of the ring
        const uint32_t ring = wg * kRingStages;
        uint32_t q_uses = 0, my_batch = ~0u;
        // Per result of this lane (Reduce's out[i]): its logits row offset (token) and tile row,
        // fixed per lane, and the tokens its query token sees (per batch; 0: not stored: the
        // padding token of next_n = 3, or a lane that holds a copy, not the owner, at next_n = 1).
        uint32_t out_tok[Reduce::kOutPerLane], out_row[Reduce::kOutPerLane], out_len[Reduce::kOutPerLane];
#pragma unroll
        for (uint32_t i = 0; i < Reduce::kOutPerLane; ++i) {
            out_tok[i] = Reduce::out_token(i, lane);
            out_row[i] = Reduce::out_row(i, warp, lane);
            out_len[i] = 0;
        }
        float wr[Reduce::kNumWeights];
        float acc[kN / 2];
        Split cur{};
        for (uint32_t item = 0; walker.next(cur); ++item) {
            const uint32_t tiles = cur.n;
            if (item % kNumMathWG != wg) continue;  // the other warpgroup's split, in its own ring
            if (cur.b != my_batch) {
                // Every wgmma read of the previous batch's q is done (waited): hand its slot back.
                if (my_batch != ~0u && lane == 0) ptx::mbar_arrive(smem.q_empty(wg, (q_uses - 1) % kQSlots));
                my_batch = cur.b;
                Reduce::load_weights(weights + static_cast<uint64_t>(cur.b) * kNextN * weights_stride,
                                     static_cast<uint32_t>(weights_stride), kNextN, lane, wr);
#pragma unroll
                for (uint32_t i = 0; i < Reduce::kOutPerLane; ++i) {
                    const uint32_t len = out_tok[i] < kNextN && Reduce::out_owner(lane)
                                             ? paged_mqa::token_kv_len(context_lens, cur.b, out_tok[i], kNextN, lens_2d)
                                             : 0u;
                    out_len[i] = min(len, max_context_len);
                }
                const uint32_t i = q_uses % kQSlots;
                ptx::mbar_wait_uniform(smem.q_full(wg, i), (q_uses / kQSlots) & 1u);
                desc_q = ptx::desc_advance(desc_q0, i * Layout::kQBytes);
                ++q_uses;
            }
            OutT* out_rows = logits + static_cast<uint64_t>(cur.b) * kNextN * logits_stride;
            for (uint32_t t = 0; t < tiles; ++t, pipe.advance()) {
                const uint32_t s = ring + pipe.stage;
                ptx::mbar_wait_uniform(smem.full(s), pipe.phase);
                const uint64_t desc_kv = ptx::desc_advance(desc_kv0, s * Layout::kKVBytes);
                ptx::fence_operands(acc);
                ptx::wgmma_fence();
#pragma unroll
                for (uint32_t k = 0; k < kHeadDim / 32; ++k)
                    Mma::mma(ptx::desc_advance(desc_kv, k * 32), ptx::desc_advance(desc_q, k * 32), acc, k > 0);
                ptx::wgmma_commit();
                ptx::wgmma_wait<0>();
                ptx::fence_operands(acc);
                const float sf_lo = smem.sf(s)[row], sf_hi = smem.sf(s)[row + 8];
                release_stage_after_reads<1>(smem.empty(s), smem.scratch() + threadIdx.x, bits_of(sf_lo, sf_hi), lane,
                                             true);
                float out[Reduce::kOutPerLane];
                Reduce::reduce(acc, wr, sf_lo, sf_hi, lane, out);
                const uint32_t kv0 = (cur.t + t) * kTileKV;
#pragma unroll
                for (uint32_t i = 0; i < Reduce::kOutPerLane; ++i) {
                    const uint32_t j = kv0 + out_row[i];
                    if (j < out_len[i]) out_rows[out_tok[i] * logits_stride + j] = to_out<OutT>(out[i]);
                }
            }
        }
    }
}

// Writes -inf into the cells of `logits` no query sees: row b * next_n + t, columns
// [min(len_t, max_context_len), max_context_len). Grid (B * next_n, ceil(max_context_len /
// kCleanChunk)), block kCleanThreads; the block of column chunk y covers [y, y + 1) chunks.
template <typename OutT>
__device__ __forceinline__ void paged_mqa_logits_clean_impl(const int* context_lens, uint32_t next_n, bool lens_2d,
                                                            OutT* logits, uint64_t logits_stride,
                                                            uint32_t max_context_len) {
    using namespace sm90_paged_mqa;
    const uint32_t row = blockIdx.x, b = row / next_n, t = row % next_n;
    const uint32_t first = min(paged_mqa::token_kv_len(context_lens, b, t, next_n, lens_2d), max_context_len);
    const uint32_t chunk0 = blockIdx.y * kCleanChunk;
    const uint32_t end = min(chunk0 + kCleanChunk, max_context_len);
    OutT* out = logits + static_cast<uint64_t>(row) * logits_stride;
    const OutT neg_inf = to_out<OutT>(-__int_as_float(0x7f800000));
    for (uint32_t j = max(first, chunk0) + threadIdx.x; j < end; j += kCleanThreads) out[j] = neg_inf;
}

}  // namespace deep_gemm
