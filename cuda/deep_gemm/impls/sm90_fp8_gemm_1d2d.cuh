// SM90 FP8 GEMM, "1D2D" scaling: D[M,N] (bf16) = (A * SFA) @ (B * SFB)^T
//   A   [M, K] e4m3, K-major            (TMA, 128B swizzle)
//   SFA fp32 [ceil(K/128), align(M,4)]  MN-major, one scale per row per 128 K (TMA)
//   B   [N, K] e4m3, K-major            (TMA, 128B swizzle)
//   SFB fp32 [ceil(N/128), ceil(K/128)] row-major, one scale per 128x128 block (plain loads)
//   D   [M, N] bf16, row-major          (TMA store, swizzled staging tile)
// Any K > 0 (a partial last K block reads zeros past K). M and N are arbitrary (TMA zero-fills loads, clips stores);
// the D row pitch must be 16-byte aligned (N % 8 == 0 for a packed D).
//
// Per tile and per 128-wide K block, each math warpgroup runs four wgmmas into a fresh
// accumulator and then promotes it into the FP32 result with sfa[row] * sfb[n-block]:
// Hopper's FP8 wgmma accumulates with reduced precision, so the partial sums never run
// longer than one scale block.
#pragma once
#include <deep_gemm/common/sm90_fp8_core.cuh>
#include <deep_gemm/epilogue/sm90_store_bf16.cuh>

namespace deep_gemm {

namespace sm90_1d2d {

// A tile's columns can straddle two 128-wide SFB blocks when BLOCK_N does not divide 128;
// with BLOCK_N <= 128, or BLOCK_N - 128 dividing 128, no tile ever touches three.
template <uint32_t kBlockN>
constexpr bool kMayStraddle = (128 % kBlockN) != 0;

template <uint32_t kBlockN>
constexpr bool kAtMostTwoSfbBlocks = kBlockN <= 128 || (128 % (kBlockN > 128 ? kBlockN - 128 : 1)) == 0;

// Where a tile straddles two SFB blocks, its first `first_cols` columns use the first one.
// Tiles start at multiples of BLOCK_N, so first_cols = min(BLOCK_N, 128, 128 - n0 % 128)
// takes at most 128 / gcd(BLOCK_N, 128) values. Where those are few (<= 4: BLOCK_N 96, 160,
// 192, ...), the K loop is compiled once per value (FirstCols), and the promotion picks each
// column group's scale at compile time instead of with a select per group and K block.
template <uint32_t kValue>
struct FirstCols {
    __device__ __forceinline__ constexpr operator uint32_t() const { return kValue; }
};

__host__ __device__ constexpr uint32_t gcd_u32(uint32_t a, uint32_t b) { return b == 0 ? a : gcd_u32(b, a % b); }

template <uint32_t kBlockN>
constexpr uint32_t kMaxFirstCols = kBlockN < 128 ? kBlockN : 128;  // a tile starting on a block edge

template <uint32_t kBlockN>
constexpr bool kFixedFirstCols = kMayStraddle<kBlockN> && 128 / gcd_u32(kBlockN, 128) <= 4;

template <uint32_t kBlockN>
__host__ __device__ constexpr bool first_cols_reachable(uint32_t value) {
    for (uint32_t j = 0; j < 128 / gcd_u32(kBlockN, 128); ++j) {
        const uint32_t cols = 128 - (j * kBlockN) % 128;
        if ((cols < kMaxFirstCols<kBlockN> ? cols : kMaxFirstCols<kBlockN>) == value) return true;
    }
    return false;
}

// Calls f(cols) with the tile's first_cols (clamped to kMaxFirstCols): a FirstCols<value>
// where kFixedFirstCols, else the runtime value.
template <uint32_t kBlockN, uint32_t kTry = 16, typename F>
__device__ __forceinline__ void with_first_cols(uint32_t first_cols, F&& f) {
    constexpr uint32_t kMax = kMaxFirstCols<kBlockN>;
    if constexpr (!kFixedFirstCols<kBlockN>) {
        f(first_cols < kMax ? first_cols : kMax);
    } else if constexpr (kTry >= kMax) {
        f(FirstCols<kMax>{});  // every smaller reachable value was tested before
    } else if constexpr (first_cols_reachable<kBlockN>(kTry)) {
        if (first_cols == kTry) f(FirstCols<kTry>{});
        else with_first_cols<kBlockN, kTry + 16>(first_cols, f);
    } else {
        with_first_cols<kBlockN, kTry + 16>(first_cols, f);
    }
}

// final += acc * sfa[row] * sfb[col block], per 8-column group. Cols: uint32_t or FirstCols.
// kFirst: the tile's first K block, whose promotion writes the result instead of adding to
// a zeroed one.
template <uint32_t kBlockN, bool kFirst = false, typename Cols>
__device__ __forceinline__ void promote(float (&result)[kBlockN / 2], const float (&acc)[kBlockN / 2],
                                        float sfa_lo, float sfa_hi, float sfb_0, float sfb_1,
                                        Cols first_block_cols) {
    const float lo0 = sfa_lo * sfb_0, hi0 = sfa_hi * sfb_0;
    const float lo1 = sfa_lo * sfb_1, hi1 = sfa_hi * sfb_1;
#pragma unroll
    for (uint32_t j = 0; j < kBlockN / 8; ++j) {
        // Groups of 8 columns never straddle: block edges are multiples of 16 columns
        // away from a tile start (BLOCK_N % 16 == 0).
        const bool first = !kMayStraddle<kBlockN> || j * 8 < static_cast<uint32_t>(first_block_cols);
        const float lo = first ? lo0 : lo1, hi = first ? hi0 : hi1;
        if constexpr (kFirst) {
            result[4 * j + 0] = acc[4 * j + 0] * lo;
            result[4 * j + 1] = acc[4 * j + 1] * lo;
            result[4 * j + 2] = acc[4 * j + 2] * hi;
            result[4 * j + 3] = acc[4 * j + 3] * hi;
        } else {
            result[4 * j + 0] = fmaf(acc[4 * j + 0], lo, result[4 * j + 0]);
            result[4 * j + 1] = fmaf(acc[4 * j + 1], lo, result[4 * j + 1]);
            result[4 * j + 2] = fmaf(acc[4 * j + 2], hi, result[4 * j + 2]);
            result[4 * j + 3] = fmaf(acc[4 * j + 3], hi, result[4 * j + 3]);
        }
    }
}

}  // namespace sm90_1d2d

// A compile-time flag passed to a generic lambda (the K loop's peeled first block).
template <bool kValue>
struct BoolTag {
    static constexpr bool value = kValue;
};

// Compile-time count of a warpgroup's computed slabs (selects a K-loop variant).
template <uint32_t kCount>
struct SlabCount {
    static constexpr uint32_t value = kCount;
};

// Per-token (1x128) scales of A read straight from global memory: fp32 [M, K/128] at any
// strides (elements), as per-token quantisation leaves them. Used where converting them to
// the TMA layout would cost a kernel launch and an allocation per call (small M, see the
// host heuristics).
// Each math thread reads its two rows' scales, one K block ahead (both K-loop schedules).
struct SfaRowsGlobal {
    const float* base = nullptr;
    uint32_t stride_m = 0, stride_k = 0;
    // Row `row` of a GEMM with m rows: rows past M read row M - 1, whose scale then
    // multiplies the zeros the TMA filled in.
    __device__ __forceinline__ const float* row_of(uint32_t row, uint32_t m) const {
        return base + static_cast<size_t>(min(row, m - 1)) * stride_m;
    }
    __device__ __forceinline__ float at(const float* row_ptr, uint32_t kb) const { return __ldg(row_ptr + kb * stride_k); }
};

// Template parameters:
//   kShapeM/N/K   compile-time shape, or 0 to take the runtime argument
//   kBlockM       64 (1 math warpgroup), 128 (2) or 256 (2, each computing two 64-row slabs
//                 one after the other: while one warpgroup promotes a slab, the other's
//                 wgmmas keep the tensor cores busy). Slab i of warpgroup w holds the tile's
//                 rows [64 (w + 2 i), +64): a tile that is only partly valid (a masked group's
//                 last rows, a contiguous tile that reaches into the next group) still splits
//                 its valid slabs evenly over both warpgroups. kBlockN multiple of 16, <= 256.
//                 A warpgroup computes only the leading slabs whose first row is valid (rows
//                 < M; for the grouped variants, rows of the tile's group).
//   kStages       pipeline depth; kCluster 1 or 2 (TMA multicast of A within the pair)
//   kGroupN       scheduler group width in n-blocks (even when kCluster == 2)
//   kOverlapMma   two accumulators: the tensor cores run block kb+1 while the warpgroup
//                 promotes block kb (the default for dense BLOCK_N <= 128; off for grouped).
//                 Needs 3 x BLOCK_N/2 accumulator registers: BLOCK_N <= 128.
//   kGemmType     kNormal (dense), or an m-grouped MoE variant (scheduler/tile_scheduler.cuh):
//                 B is [G * N, K], SFB [G, ceil(N/128), K/128]; shape_m is M_sum (contiguous)
//                 or rows per group (masked: A and D rank-3 maps [G][shape_m][.] whose
//                 groups may sit at any stride, SFA [G][K/128][align4]);
//                 grouped_layout / num_groups / align_m feed the scheduler; d / ld_d are the
//                 output for tiles with rows that must not be written (masked: d is group
//                 0's first row, group g's is d + g * d_group_stride). Unused for kNormal.
//   kDynamicTiles  m-grouped only: tiles after a CTA's first are claimed from `tile_counter`
//                 (one int32, zero at launch) instead of the static stride (see
//                 scheduler/tile_scheduler.cuh).
//   kMBoxes       dense, cluster 1: how the A and SFA boxes cover the rows (MBoxes in
//                 common/sm90_fp8_core.cuh); kTail takes tmap_a_tail / tmap_sfa_tail.
//   kEvictFirstB  dense, B read once (heuristics::sm90_b_read_once): B loaded under L2's
//                 evict-first policy, so streaming it keeps A and lines still to be written back in L2.
//   kSfaFromGlobal  dense, one slab per warpgroup (kBlockM <= 128; overlapped or plain
//                 schedule): SFA from `sfa_global` (tmap_sfa unused, may be null), each thread
//                 loading its two rows' scales (and the SFB) one K block ahead, instead of the
//                 TMA bringing them into the stage.
// Block: 128 * (min(kBlockM / 64, 2) + 1) threads; dynamic smem: Fp8SmemLayout<...>::kDynamicBytes.
template <uint32_t kShapeM, uint32_t kShapeN, uint32_t kShapeK, uint32_t kBlockM, uint32_t kBlockN,
          uint32_t kStages, uint32_t kCluster, uint32_t kGroupN, bool kOverlapMma = false,
          GemmType kGemmType = GemmType::kNormal, bool kSfaFromGlobal = false, bool kDynamicTiles = false,
          sm90::MBoxes kMBoxes = sm90::MBoxes::kBlock, typename ColMap = epilogue::IdentityColumns,
          bool kEvictFirstB = false>
__device__ __forceinline__ void sm90_fp8_gemm_1d2d_impl(uint32_t shape_m, uint32_t shape_n, uint32_t shape_k,
                                                        const float* __restrict__ sfb,
                                                        const CUtensorMap* tmap_a, const CUtensorMap* tmap_b,
                                                        const CUtensorMap* tmap_sfa, const CUtensorMap* tmap_d,
                                                        const int* grouped_layout = nullptr,
                                                        uint32_t num_groups = 1, uint32_t align_m = 1,
                                                        __nv_bfloat16* d = nullptr, uint32_t ld_d = 0,
                                                        SfaRowsGlobal sfa_global = {}, int* tile_counter = nullptr,
                                                        const CUtensorMap* tmap_a_tail = nullptr,
                                                        const CUtensorMap* tmap_sfa_tail = nullptr,
                                                        uint64_t d_group_stride = 0) {
    using namespace sm90;
    constexpr uint32_t kNumMathWG = kBlockM == 64 ? 1 : 2;
    constexpr uint32_t kSlabs = kBlockM / 64 / kNumMathWG;  // 64-row wgmma slabs per warpgroup
    constexpr uint32_t kSlabStride = kNumMathWG * 64;       // rows from one slab of a warpgroup to its next
    constexpr uint32_t kNumMathThreads = kNumMathWG * 128;
    static_assert(kBlockM == 64 || kBlockM == 128 || kBlockM == 256, "BLOCK_M is 64, 128 or 256");
    static_assert(kSlabs == 1 || !kOverlapMma, "BLOCK_M 256: plain schedule (one accumulator per slab in turn)");
    static_assert(kBlockN % 16 == 0 && kBlockN >= 16 && kBlockN <= 256, "BLOCK_N: multiple of 16 in [16, 256]");
    static_assert(sm90_1d2d::kAtMostTwoSfbBlocks<kBlockN>, "a tile may span three SFB blocks");
    static_assert(!kOverlapMma || kBlockN <= 128, "two accumulators need BLOCK_N <= 128");
    static_assert(!kSfaFromGlobal || ((kOverlapMma || kSlabs == 1) && kGemmType == GemmType::kNormal),
                  "scales from global memory: dense, one slab per warpgroup");
    static_assert(kMBoxes == MBoxes::kBlock || (kGemmType == GemmType::kNormal && kCluster == 1),
                  "boxes of the rows that exist: dense, cluster 1");
    static_assert(kGemmType == GemmType::kNormal || ColMap::kIdentity,
                  "column maps (skip-head-mid): dense only");
    // m-grouped: the producer hands its tiles to the math warpgroups (tile slots), so the
    // schedule's layout reads and group walk stay off their path between two tiles. Dense
    // GEMMs measured slower that way (H200, 2026-11-30): their walk is a few integer
    // operations, which the math warpgroups keep doing themselves.
    constexpr bool kTileSlots = kGemmType != GemmType::kNormal;
    using Layout = Fp8SmemLayout<kBlockM, kBlockN, kStages, false, kBlockM * kBlockN * 2, kTileSlots>;
    static_assert(kNumMathWG * 4 <= Layout::kMaxMathWarps, "reads_done words for every math thread");
    static_assert(launch_smem_fits<Layout>(), "the launch allocates less shared memory than this layout");
    using Scheduler = TileScheduler<kGemmType, kBlockM, kBlockN, kGroupN, kCluster, kDynamicTiles>;
    // The group-walking schedulers (masked, psum) keep a cursor in the producer thread,
    // which spilled at 40 registers: give it 56 and the math warpgroups 224 (the same 64K
    // total: 128 * (168 - 56) == 256 * (224 - 168); setmaxnreg wants multiples of 8).
    // kNormal and the contiguous index layout keep kProducerRegs / kMathRegs.
    constexpr bool kWalksGroups = kGemmType == GemmType::kMGroupedMasked || kGemmType == GemmType::kMGroupedContiguousPsum;
    constexpr uint32_t kProdRegs = kWalksGroups ? 56 : kProducerRegs;
    // Contiguous index layout: the math warpgroups fetch the next tile and the SFB of its
    // first K block before the current tile's epilogue, so that global round trip runs under
    // the epilogue rather than at the next tile's start (measured when the fetch still
    // walked the schedule and made its layout reads). Measured on the H200
    // (2026-11-30): +5% on 4 x ~8192 rows, +1-2% on 8 x ~4096.
    // Not taken by the other variants: masked 6 x ~1024 lost 4.5% and the dense M = 128 rows
    // 2-4% with the same change.
    constexpr bool kEarlyNext = kGemmType == GemmType::kMGroupedContiguous;
    constexpr uint32_t kMathRegsHere = kWalksGroups ? 224 : kMathRegs;
    // The plain K loop peels a tile's first K block: its promotion writes the result, which
    // is then not zeroed at the tile's start. Measured on the H200 (2026-12-01):
    // 4096x2112x7168 (128x192) 9% faster, masked 6 x ~1024 2.2%, masked
    // 32 x ~192 1.2%, 4096x24576x1536 1.1%, other rows equal, except the contiguous index
    // layout: 0.7% slower on 4 x ~8192 rows (K 7168; 0.6% again on 2026-12-02), so it keeps
    // the zeroed form unless its K is compiled in and at most 16 blocks, where the tile start
    // weighs more: 8 x ~4096 rows (K 2048) 0.5% faster in six of six paired rounds
    // (2026-12-02, 69cfdb8).
    constexpr bool kPeelFirst =
        kGemmType != GemmType::kMGroupedContiguous || (kShapeK != 0 && kShapeK <= 16 * kBlockK);
    static_assert(register_budgets_fit(kNumMathThreads, kProdRegs, kMathRegsHere), "setmaxnreg budgets over the entry allocation");

    const uint32_t m = shape_dim<kShapeM>(shape_m);
    const uint32_t n = shape_dim<kShapeN>(shape_n);
    const uint32_t k = shape_dim<kShapeK>(shape_k);
    // A K not a multiple of 128 ends in a partial block: its TMA boxes read zeros past K.
    const uint32_t num_k_blocks = ceil_div(k, kBlockK);
    const uint32_t num_sfb_n = ceil_div(n, 128u);

    extern __shared__ uint8_t smem_raw[];
    const Layout smem(smem_raw);

    if constexpr (kSfaFromGlobal)
        gemm_kernel_setup<Layout, kStages, kNumMathWG * 4, kCluster>(smem, kNumMathThreads, tmap_a, tmap_b, tmap_d,
                                                                     tmap_a_tail);
    else
        gemm_kernel_setup<Layout, kStages, kNumMathWG * 4, kCluster>(smem, kNumMathThreads, tmap_a, tmap_b, tmap_sfa,
                                                                     tmap_d, tmap_a_tail, tmap_sfa_tail);

    if (threadIdx.x >= kNumMathThreads) {
        // ---- TMA producer warpgroup ----
        ptx::setmaxnreg_dec<kProdRegs>();
        // Without the TMA's SFA (kSfaFromGlobal: the math threads read it) the stage carries
        // no SFA bytes.
        const BoxRows box = box_rows<kMBoxes, kBlockM>(m);
        const uint32_t tx = Layout::stage_tx_bytes(box.a, kSfaFromGlobal ? 0u : box.sfa);
        if (threadIdx.x == kNumMathThreads)
            producer_loop<Layout, Scheduler, kBlockM, kBlockN, kStages, kCluster, false, kTileSlots, !kSfaFromGlobal,
                          kMBoxes == MBoxes::kTail, kEvictFirstB>(
                smem, Scheduler(m, n, grouped_layout, num_groups, align_m, tile_counter), num_k_blocks, tmap_a, tmap_b,
                tmap_sfa, nullptr, tx, tail_maps<Layout, kBlockM, kMBoxes, !kSfaFromGlobal>(m, tmap_a_tail, tmap_sfa_tail));
        __syncwarp();
    } else {
        // ---- math warpgroups ----
        ptx::setmaxnreg_inc<kMathRegsHere>();
        // row_lo: this thread's row in its warpgroup's first slab (slab i: + kSlabStride i).
        const MathThread me = math_thread();
        const uint32_t wg = me.wg, warp = me.warp, lane = me.lane, row_lo = me.row_lo;
        const StageDescs<Layout> descs(smem, wg);
        Scheduler sched(m, n, grouped_layout, num_groups, align_m);
        PipeState<kStages> pipe;
        TileInfo tile;
        float result[kSlabs][kBlockN / 2], acc[kBlockN / 2];
        float acc2[kOverlapMma ? kBlockN / 2 : 1];  // second accumulator (overlap only)
        float first_sfb_0 = 0.0f, first_sfb_1 = 0.0f;  // kEarlyNext: SFB of the tile's first K block
        // Zeroes result slabs [first, kSlabs): all of them before the K loop, or with
        // kPeelFirst (whose first K block writes the computed slabs) the ones not computed.
        auto zero_slabs = [&](auto first) {
#pragma unroll
            for (uint32_t sl = decltype(first)::value; sl < kSlabs; ++sl)
#pragma unroll
                for (uint32_t i = 0; i < kBlockN / 2; ++i) result[sl][i] = 0.0f;
        };
        bool has_tile = false;
        // The next tile: as the producer published it, or walked here (dense).
        auto fetch_tile = [&]() {
            if constexpr (kTileSlots) return fetch_published_tile(smem, pipe, tile);
            else return sched.next(tile);
        };
        // SFB rows of a tile: columns [0, first_cols) use block n0/128, the rest the next
        // (both within the tile's group: the clamp keeps the second inside it).
        struct SfbRows { const float* row0; const float* row1; };
        auto sfb_rows = [&](const TileInfo& t) {
            const uint32_t blk0 = t.n_block * kBlockN / 128;
            const float* group_sfb = sfb + sched.group(t) * num_sfb_n * num_k_blocks;
            return SfbRows{group_sfb + blk0 * num_k_blocks, group_sfb + min(blk0 + 1, num_sfb_n - 1) * num_k_blocks};
        };
        auto early_next = [&]() {
            has_tile = fetch_tile();
            if (has_tile) {
                const SfbRows rows = sfb_rows(tile);
                first_sfb_0 = __ldg(rows.row0);
                first_sfb_1 = __ldg(rows.row1);
            }
        };
        if constexpr (kEarlyNext) early_next();
        DG_TILE_TRACE(uint32_t trace_i = 0;)
        while (kEarlyNext ? has_tile : fetch_tile()) {
            DG_TILE_TRACE(trace_tile_stamp(trace_i, 0);)
            const uint32_t m0 = sched.a_row(tile), n0 = tile.n_block * kBlockN;
            const uint32_t first_cols = (n0 / 128 + 1) * 128 - n0;
            const SfbRows tile_sfb = sfb_rows(tile);
            const float* sfb_row0 = tile_sfb.row0;
            const float* sfb_row1 = tile_sfb.row1;
            // The slabs this warpgroup computes: the leading ones whose first row is valid.
            // Grouped: which of this thread's rows are stored (read before the K loop so the
            // layout loads are off the epilogue's path).
            uint32_t n_active = 0;
            bool lo_ok[kSlabs], hi_ok[kSlabs];
#pragma unroll
            for (uint32_t sl = 0; sl < kSlabs; ++sl) {
                const uint32_t first = m0 + wg * 64 + sl * kSlabStride;
                const bool valid = kGemmType == GemmType::kNormal ? first < m : sched.row_valid(tile, first);
                if (valid && n_active == sl) n_active = sl + 1;
                lo_ok[sl] = sched.row_valid(tile, m0 + row_lo + sl * kSlabStride);
                hi_ok[sl] = sched.row_valid(tile, m0 + row_lo + sl * kSlabStride + 8);
            }
            n_active = __shfl_sync(0xffffffffu, n_active, 0);
#pragma unroll
            for (uint32_t sl = 0; sl < kSlabs; ++sl) {
                lo_ok[sl] = lo_ok[sl] && sl < n_active;
                hi_ok[sl] = hi_ok[sl] && sl < n_active;
            }
            if constexpr (!kPeelFirst) zero_slabs(SlabCount<0>{});

            // Hands stage s back once this warp's SFA reads of it (`reads`, their bits) are in
            // registers; with kSfaFromGlobal the stage holds no scales to wait for.
            auto release_after_sfa = [&](uint32_t s, uint32_t reads) {
                if constexpr (kSfaFromGlobal) release_stage<kCluster>(smem.empty(s), lane, tile.peer_alive);
                else release_stage_after_reads<kCluster>(smem.empty(s), smem.reads_done(wg * 4 + warp, lane), reads,
                                                         lane, tile.peer_alive);
            };

            // Plain schedule over the first kActive slabs (0: only keep the pipeline moving):
            // per K block and slab, four wgmmas into `acc`, waited for, then promoted.
            auto plain_k_loop = [&](auto active, auto cols) {
                constexpr uint32_t kActive = decltype(active)::value;
                // Slabs not computed are still staged (dense: rows >= M, clipped by the TMA).
                if constexpr (kPeelFirst) zero_slabs(active);
                if constexpr (kActive == 0) {
                    for (uint32_t kb = 0; kb < num_k_blocks; ++kb, pipe.advance()) {
                        ptx::mbar_wait(smem.full(pipe.stage), pipe.phase);
                        release_stage<kCluster>(smem.empty(pipe.stage), lane, tile.peer_alive);
                    }
                    return;
                }
                float sfb_0, sfb_1;
                if constexpr (kEarlyNext) sfb_0 = first_sfb_0, sfb_1 = first_sfb_1;
                else sfb_0 = __ldg(sfb_row0), sfb_1 = __ldg(sfb_row1);
                // kSfaFromGlobal (one slab): this thread's two rows of SFA, loaded one K block
                // ahead like the SFB.
                [[maybe_unused]] const float* sfa_row_lo = nullptr;
                [[maybe_unused]] const float* sfa_row_hi = nullptr;
                float sfa_lo_g = 0.0f, sfa_hi_g = 0.0f;
                if constexpr (kSfaFromGlobal) {
                    sfa_row_lo = sfa_global.row_of(m0 + row_lo, m);
                    sfa_row_hi = sfa_global.row_of(m0 + row_lo + 8, m);
                    sfa_lo_g = sfa_global.at(sfa_row_lo, 0);
                    sfa_hi_g = sfa_global.at(sfa_row_hi, 0);
                }
                auto k_block = [&](uint32_t kb, auto first) {
                    constexpr bool kFirst = decltype(first)::value;
                    const uint32_t s = pipe.stage;
                    // Prefetch the next block's SFB while this one computes (L1-resident rows).
                    const uint32_t kb_next = min(kb + 1, num_k_blocks - 1);
                    const float next_0 = __ldg(sfb_row0 + kb_next), next_1 = __ldg(sfb_row1 + kb_next);
                    float next_sfa_lo = 0.0f, next_sfa_hi = 0.0f;
                    if constexpr (kSfaFromGlobal) {
                        next_sfa_lo = sfa_global.at(sfa_row_lo, kb_next);
                        next_sfa_hi = sfa_global.at(sfa_row_hi, kb_next);
                    }
                    // The stage's wgmma descriptors are computed before its full-barrier wait, so
                    // that fewer instructions sit between the data landing and the first wgmma.
                    // Measured on the H200 (2026-12-01): 4096x7168x16384
                    // 0.6% faster, 4096x7168x2048 1%, contiguous 4 x ~8192 0.4% slower, the
                    // other rows equal.
                    const uint64_t desc_b = descs.b(s);
                    uint64_t desc_a[kActive > 0 ? kActive : 1];  // kActive 0: compiled, never called
#pragma unroll
                    for (uint32_t sl = 0; sl < kActive; ++sl)
                        desc_a[sl] = ptx::desc_advance(descs.a(s), sl * kSlabStride * kBlockK);

                    ptx::mbar_wait(smem.full(s), pipe.phase);
                    DG_TILE_TRACE(if (kb == 0) trace_tile_stamp(trace_i, 1);)
                    uint32_t reads = 0;  // the stage's SFA reads (release_stage_after_reads)
#pragma unroll
                    for (uint32_t sl = 0; sl < kActive; ++sl) {
                        const float sfa_lo = kSfaFromGlobal ? sfa_lo_g : smem.sfa(s)[row_lo + sl * kSlabStride];
                        const float sfa_hi = kSfaFromGlobal ? sfa_hi_g : smem.sfa(s)[row_lo + sl * kSlabStride + 8];
                        reads ^= bits_of(sfa_lo, sfa_hi);
                        mma_k_block<kBlockN>(desc_a[sl], desc_b, acc);
                        if (sl == kActive - 1) release_after_sfa(s, reads);
                        sm90_1d2d::promote<kBlockN, kFirst>(result[sl], acc, sfa_lo, sfa_hi, sfb_0, sfb_1, cols);
                    }
                    sfb_0 = next_0;
                    sfb_1 = next_1;
                    sfa_lo_g = next_sfa_lo;
                    sfa_hi_g = next_sfa_hi;
                    pipe.advance();
                };
                uint32_t kb = 0;
                if constexpr (kPeelFirst) k_block(kb++, BoolTag<true>{});  // K > 0: at least one block
                for (; kb < num_k_blocks; ++kb) k_block(kb, BoolTag<false>{});
            };

            // Overlapped schedule (kOverlapMma, one slab per warpgroup).
            auto overlap_k_loop = [&](auto cols) {
                // Two accumulators: the tensor cores run block kb+1 while the warpgroup
                // promotes block kb. `issue` waits for a stage, reads its SFA and starts its
                // wgmmas into one accumulator (not waited for).
                struct Scales { float sfa_lo, sfa_hi, sfb_0, sfb_1; };
                PipeState<kStages> rel = pipe;
                // kSfaFromGlobal: this thread's two rows of SFA. Every scale of
                // K block kb + 1 is loaded while block kb is issued: at small M the loop is
                // latency-bound and a global load waited for in the same block showed (1 x
                // 2112 x 7168 measured 20.5 us against 16.7 with the scales in the stage).
                const float* sfa_row_lo = nullptr;
                const float* sfa_row_hi = nullptr;
                Scales ahead{};
                auto load_ahead = [&](uint32_t kb) {
                    ahead = {sfa_global.at(sfa_row_lo, kb), sfa_global.at(sfa_row_hi, kb), __ldg(sfb_row0 + kb),
                             __ldg(sfb_row1 + kb)};
                };
                if constexpr (kSfaFromGlobal) {
                    sfa_row_lo = sfa_global.row_of(m0 + row_lo, m);
                    sfa_row_hi = sfa_global.row_of(m0 + row_lo + 8, m);
                    load_ahead(0);
                }
                auto issue = [&](uint32_t kb, float (&a)[kBlockN / 2], Scales& sc) {
                    const uint32_t s = pipe.stage;
                    if constexpr (kSfaFromGlobal) {
                        sc = ahead;
                        load_ahead(min(kb + 1, num_k_blocks - 1));
                    } else if (kEarlyNext && kb == 0) {
                        sc.sfb_0 = first_sfb_0;
                        sc.sfb_1 = first_sfb_1;
                    } else {
                        sc.sfb_0 = __ldg(sfb_row0 + kb);
                        sc.sfb_1 = __ldg(sfb_row1 + kb);
                    }
                    ptx::mbar_wait(smem.full(s), pipe.phase);
                    DG_TILE_TRACE(if (kb == 0) trace_tile_stamp(trace_i, 1);)
                    if constexpr (!kSfaFromGlobal) {
                        sc.sfa_lo = smem.sfa(s)[row_lo];
                        sc.sfa_hi = smem.sfa(s)[row_lo + 8];
                    }
                    mma_k_block_issue<kBlockN>(descs.a(s), descs.b(s), a);
                    pipe.advance();
                };
                // `finish` waits for the only group in flight and hands its stage back;
                // `promote` then folds a completed accumulator into the result.
                auto finish = [&](float (&a)[kBlockN / 2], const Scales& sc) {
                    // The result FFMAs of the promotion issued just before must not sink
                    // below the wait (they are what overlaps the tensor cores).
                    ptx::fence_operands(result[0]);
                    ptx::wgmma_wait<0>();
                    ptx::fence_operands(a);
                    release_after_sfa(rel.stage, bits_of(sc.sfa_lo, sc.sfa_hi));
                    rel.advance();
                };
                auto promote = [&](const float (&a)[kBlockN / 2], const Scales& sc) {
                    sm90_1d2d::promote<kBlockN>(result[0], a, sc.sfa_lo, sc.sfa_hi, sc.sfb_0, sc.sfb_1, cols);
                };
                // Block kb+1 is issued before block kb is promoted, and every group is waited
                // for (wait<0>) before the next issue: no wgmma is in flight across a loop
                // back edge or a branch. ptxas only proves a `wait_group 1` retires the older
                // group in straight-line code; with a group in flight across the back edge
                // (the v3 form: issue, wait<1>, promote the older) it saw the promotion's
                // reads as reads of an in-flight accumulator and serialised every wgmma
                // (C7514). Here the promotion only ever reads the accumulator that is not
                // in flight, so the tensor cores idle only from a wait to the next issue.
                if constexpr (kPeelFirst) zero_slabs(SlabCount<0>{});  // this schedule does not peel
                Scales sc0, sc1;
                uint32_t kb = 1;
                if (num_k_blocks > 0) {
                    issue(0, acc, sc0);
                    finish(acc, sc0);
                }
                for (; kb + 1 < num_k_blocks; kb += 2) {
                    issue(kb, acc2, sc1);
                    promote(acc, sc0);
                    finish(acc2, sc1);
                    issue(kb + 1, acc, sc0);
                    promote(acc2, sc1);
                    finish(acc, sc0);
                }
                if (kb < num_k_blocks) {
                    issue(kb, acc2, sc1);
                    promote(acc, sc0);
                    finish(acc2, sc1);
                    promote(acc2, sc1);
                } else if (num_k_blocks > 0) {
                    promote(acc, sc0);
                }
            };

            if (n_active == 0) {
                plain_k_loop(SlabCount<0>{}, first_cols);
            } else if constexpr (kOverlapMma) {
                sm90_1d2d::with_first_cols<kBlockN>(first_cols, overlap_k_loop);
            } else if (kSlabs == 1 || n_active == kSlabs) {
                sm90_1d2d::with_first_cols<kBlockN>(first_cols, [&](auto cols) { plain_k_loop(SlabCount<kSlabs>{}, cols); });
            } else {
                sm90_1d2d::with_first_cols<kBlockN>(first_cols, [&](auto cols) { plain_k_loop(SlabCount<1>{}, cols); });
            }
            DG_TILE_TRACE(trace_tile_stamp(trace_i, 2);)
            // The epilogue reads no field of `tile`, so the next tile can be fetched first.
            if constexpr (kEarlyNext) early_next();
            uint8_t* stage_wg = smem.d() + wg * kSlabs * 64 * kBlockN * 2;
            const uint32_t bar_id = 1 + wg;  // named barrier per math warpgroup (0 = __syncthreads)
            if constexpr (kGemmType == GemmType::kNormal) {
                // Rows >= M (also of slabs not computed, left at zero) are clipped by the TMA.
                epilogue::store_tile_bf16<kBlockN, kSlabs, ColMap>(result, stage_wg, tmap_d, bar_id, m0 + wg * 64,
                                                                    kSlabStride, n0);
            } else if constexpr (Scheduler::kRank3Groups) {
                // Masked: D is [G][m][n] at any group stride (rank-3 map; `d` offset to the group).
                const uint32_t g = tile.group;
                epilogue::store_tile_bf16_rows<kBlockN, kSlabs, true>(
                    result, stage_wg, tmap_d, bar_id, sched.row_in_group(tile, m0) + wg * 64, kSlabStride, n0, lo_ok,
                    hi_ok, d + g * d_group_stride, ld_d, n, static_cast<int32_t>(g));
            } else {
                epilogue::store_tile_bf16_rows<kBlockN, kSlabs>(result, stage_wg, tmap_d, bar_id, m0 + wg * 64,
                                                                 kSlabStride, n0, lo_ok, hi_ok, d, ld_d, n);
            }
            DG_TILE_TRACE(trace_tile_stamp(trace_i, 3); ++trace_i;)
        }
        if (threadIdx.x % 128 == 0) ptx::tma_store_wait<0>();
    }
    // Keep this CTA's shared memory alive until the peer's last remote arrivals are done.
    if constexpr (kCluster > 1) ptx::cluster_sync();
}

}  // namespace deep_gemm
