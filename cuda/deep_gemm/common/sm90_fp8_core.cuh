// Pieces shared by the SM90 FP8 block-scaled GEMM kernels (1D2D, 1D1D, k-grouped), on the
// pipeline of common/sm90_pipeline.cuh: the shared-memory layout, the TMA producer loop and
// the per-128-K wgmma step. The impls add the scale promotion and the epilogue.
//
// Block layout: warpgroups 0 .. kNumMathWG-1 compute (64 rows of the tile each), the
// last warpgroup produces (one elected thread issues every TMA load).
#pragma once
#include <deep_gemm/common/sm90_pipeline.cuh>
#include <deep_gemm/mma/wgmma_e4m3.cuh>
#include <deep_gemm/ptx/mbarrier.cuh>
#include <deep_gemm/ptx/tma.cuh>
#include <deep_gemm/ptx/sync.cuh>
#include <deep_gemm/ptx/wgmma.cuh>
#include <deep_gemm/scheduler/tile_scheduler.cuh>

namespace deep_gemm::sm90 {

constexpr uint32_t kBlockK = 128;           // one scale block of K per pipeline stage
constexpr uint32_t kWgmmaK = 32;            // K of one fp8 wgmma

// Dynamic shared memory, from a 1024-byte aligned base (the 128B swizzle repeats every
// 1024 bytes, and TMA and wgmma both apply it on absolute addresses):
//   [D staging tile] [A x STAGES] [B x STAGES] [SFA x STAGES] [SFB x STAGES] [barriers]
//   [tile slots x STAGES, with kTileSlots] [one word per math thread: release_stage_after_reads]
// The host mirrors this in cpp/deep_gemm/heuristics/sm90_fp8_gemm.hpp (smem_bytes).
// kTileSlots: a TileSlot per stage, in which the producer hands its tiles to the math
// warpgroups (see producer_loop); false where they walk the schedule themselves.
template <uint32_t kBlockM, uint32_t kBlockN, uint32_t kStages, bool kSfbInSmem, uint32_t kDStageBytes,
          bool kTileSlots = false>
struct Fp8SmemLayout {
    static constexpr uint32_t kDBytes = align_up(kDStageBytes, 1024u);
    static constexpr uint32_t kABytes = kBlockM * kBlockK;          // fp8: 1 byte per element
    static constexpr uint32_t kBBytes = kBlockN * kBlockK;
    static constexpr uint32_t kSfaBytes = align_up(kBlockM * 4u, 128u);
    static constexpr uint32_t kSfbBytes = kSfbInSmem ? align_up(kBlockN * 4u, 128u) : 0u;
    static constexpr uint32_t kAOff = kDBytes;
    static constexpr uint32_t kBOff = kAOff + kStages * kABytes;
    static constexpr uint32_t kSfaOff = kBOff + kStages * kBBytes;
    static constexpr uint32_t kSfbOff = kSfaOff + kStages * kSfaBytes;
    static constexpr uint32_t kBarOff = kSfbOff + kStages * kSfbBytes;
    static constexpr uint32_t kSlotOff = kBarOff + 2 * kStages * 8;  // 16-byte aligned
    static constexpr uint32_t kReadsOff = kSlotOff + (kTileSlots ? kStages * sizeof(TileSlot) : 0u);
    static constexpr uint32_t kMaxMathWarps = 8;
    static constexpr uint32_t kTotalBytes = kReadsOff + kMaxMathWarps * 32 * 4;
    static constexpr uint32_t kDynamicBytes = kTotalBytes + 1024;   // room to align the base
    // Bytes the TMA delivers per stage (out-of-bounds fill counts as delivered) when its A
    // and SFA boxes cover a_rows and sfa_rows rows (0: SFA not loaded by the TMA).
    static __host__ __device__ constexpr uint32_t stage_tx_bytes(uint32_t a_rows, uint32_t sfa_rows) {
        return a_rows * kBlockK + kBBytes + sfa_rows * 4u + (kSfbInSmem ? kBlockN * 4u : 0u);
    }

    static_assert(kABytes % 1024 == 0 && kBBytes % 1024 == 0, "tiles must keep 1024-byte alignment");
    static_assert(kTotalBytes + 1024 <= 232448, "shared memory over the 227 KB per-block limit");

    uint8_t* base;
    // `raw` must be the extern __shared__ array itself: offsetting it (rather than casting
    // through an integer) keeps the shared address space visible to the compiler, so the
    // scale reads compile to LDS with constant offsets instead of generic loads.
    __device__ __forceinline__ explicit Fp8SmemLayout(uint8_t* raw)
        : base(raw + ((1024u - (ptx::smem_addr(raw) & 1023u)) & 1023u)) {}
    __device__ __forceinline__ uint8_t* d() const { return base; }
    __device__ __forceinline__ uint8_t* a(uint32_t s) const { return base + kAOff + s * kABytes; }
    __device__ __forceinline__ uint8_t* b(uint32_t s) const { return base + kBOff + s * kBBytes; }
    __device__ __forceinline__ float* sfa(uint32_t s) const {
        return reinterpret_cast<float*>(base + kSfaOff + s * kSfaBytes);
    }
    __device__ __forceinline__ float* sfb(uint32_t s) const {
        return reinterpret_cast<float*>(base + kSfbOff + s * kSfbBytes);
    }
    __device__ __forceinline__ uint64_t* full(uint32_t s) const {
        return reinterpret_cast<uint64_t*>(base + kBarOff) + s;
    }
    __device__ __forceinline__ uint64_t* empty(uint32_t s) const {
        return reinterpret_cast<uint64_t*>(base + kBarOff) + kStages + s;
    }
    // The word of lane `lane` of math warp `warp`: one per thread, so that no two threads
    // ever write the same word (compute-sanitizer racecheck reports none).
    __device__ __forceinline__ uint32_t* reads_done(uint32_t warp, uint32_t lane) const {
        return reinterpret_cast<uint32_t*>(base + kReadsOff) + warp * 32 + lane;
    }
    __device__ __forceinline__ TileSlot* tile_slot(uint32_t s) const {
        static_assert(kTileSlots, "this layout has no tile slots");
        return reinterpret_cast<TileSlot*>(base + kSlotOff) + s;
    }
};

// Diagnostics (DG_TRACE_TILES=1 at JIT time, tools/device/tile_trace.py): the 1D2D kernels
// then stamp clock64 at each tile's boundaries, one thread per math warpgroup, into
// g_trace_tiles[((cta * 2 + warpgroup) * 64 + tile) * 4 + slot] (slot 0: tile fetched,
// 1: its first stage ready, 2: K loop done, 3: epilogue done; tiles past 64 are not
// stamped). The entry sets the buffer. DG_TILE_TRACE(statement) keeps a statement only in
// such a build, so that production kernels compile from exactly the code they had before.
#ifdef DG_TRACE_TILES
#define DG_TILE_TRACE(...) __VA_ARGS__
__device__ unsigned long long* g_trace_tiles;
__device__ __forceinline__ void trace_tile_stamp(uint32_t tile_i, uint32_t slot) {
    if (threadIdx.x % 128 == 0 && tile_i < 64) {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%clock64;" : "=l"(t) :: "memory");
        g_trace_tiles[((blockIdx.x * 2 + threadIdx.x / 128) * 64 + tile_i) * 4 + slot] = t;
    }
}
#else
#define DG_TILE_TRACE(...)
#endif

// How a dense GEMM's TMA boxes of A and SFA cover its rows (cluster 1; the host mirrors
// this in heuristics/sm90_fp8_gemm.hpp: cfg.fit_m, cfg.tail_m):
//   kBlock  BLOCK_M rows per m-block;
//   kFitM   M < BLOCK_M (one m-block): the boxes cover only the rows that exist;
//   kTail   the last m-block loads through tensor maps of its own, whose boxes cover only
//           its rows (TailMaps).
// Rows that exist: A rounded up to 8 rows (one 128-byte swizzle atom), SFA to 4 (16 bytes).
// The stage's other rows keep stale data, which reaches only accumulator rows >= M, and
// those are never stored. Boxes of BLOCK_M rows that reach mostly past M ran up to 2.6x
// slower (1 x 7168 x 16384: 84.0 against 32.3 us per call; 2026-12-01, docs/design-notes.md):
// the out-of-bounds fill, not the rows that exist, set the pace. A template parameter,
// so that every other kernel keeps its code (a runtime choice of the boxes in every kernel
// moved ptxas' register allocation and cost 4096 x 2112 x 7168 8.5%). kFitM is not kTail
// with one m-block: its second pair of maps measured 3% slower at 1 x 2112 x 7168
// (2026-12-01).
enum class MBoxes : uint32_t { kBlock, kFitM, kTail };

struct BoxRows {
    uint32_t a, sfa;
};
// The boxes of every m-block (kTail: of every m-block but the last).
template <MBoxes kBoxes, uint32_t kBlockM>
__device__ __forceinline__ BoxRows box_rows(uint32_t m) {
    if constexpr (kBoxes == MBoxes::kFitM) return {align_up(m, 8u), align_up(m, 4u)};
    else return {kBlockM, kBlockM};
}
template <uint32_t kBlockM>
__host__ __device__ constexpr uint32_t tail_first_row(uint32_t m) {
    return (ceil_div(m, kBlockM) - 1) * kBlockM;
}
template <uint32_t kBlockM>
__host__ __device__ constexpr BoxRows tail_box_rows(uint32_t m) {
    const uint32_t rows = m - tail_first_row<kBlockM>(m);
    return {align_up(rows, 8u), align_up(rows, 4u)};
}

// What the producer loads the tail m-block with: its tensor maps (sfa may be null where
// the TMA does not load SFA), the tail's first row, and the bytes a stage then receives.
struct TailMaps {
    const CUtensorMap* a = nullptr;
    const CUtensorMap* sfa = nullptr;
    uint32_t first_row = 0;
    uint32_t stage_tx_bytes = 0;
};
// A kernel's TailMaps (empty unless kBoxes is kTail); kLoadSfa: whether the TMA loads SFA.
template <typename Layout, uint32_t kBlockM, MBoxes kBoxes, bool kLoadSfa>
__device__ __forceinline__ TailMaps tail_maps(uint32_t m, const CUtensorMap* a, const CUtensorMap* sfa) {
    if constexpr (kBoxes == MBoxes::kTail) {
        const BoxRows rows = tail_box_rows<kBlockM>(m);
        return {a, sfa, tail_first_row<kBlockM>(m), Layout::stage_tx_bytes(rows.a, kLoadSfa ? rows.sfa : 0u)};
    } else {
        return {};
    }
}

// The producer: one thread walks the tile sequence and keeps the ring full. A is loaded in
// kCluster row slices so that a multicast tile and a local tile use the same tensor map
// (box = kBlockM / kCluster rows).
// kPublishTiles: the producer also hands each tile to the math warpgroups. It writes the
// tile to the TileSlot of the stage that carries the tile's first K block before it arms
// that stage's full barrier (the arrive releases the write to the waiters). After the last
// tile, the next stage carries only the end mark, completed by a plain arrive. The slot of
// a stage is rewritten only after every math warp released the stage, which they do after
// reading it. Needs num_k_blocks >= 1 (K > 0: the ops check it).
// stage_tx_bytes: what the TMA delivers per stage (Layout::stage_tx_bytes of the boxes).
// kTailMaps: tiles from tail.first_row on load A and SFA through `tail` (MBoxes::kTail).
// kEvictFirstB: B's loads under L2's evict-first policy (B read once: see ptx::tma_load_2d).
// kRolledK: the K loop kept rolled (ptx::opaque bound), for the 1D1D kernel: unrolled over a
// compiled-in K of 12 blocks its producer spilled 52-64 bytes at its 40 registers. The 1D2D
// kernel keeps the compiler's choice: rolled, its 4096 x 2112 x 7168 (128 x 192, 4 stages)
// took 111.6 / 113.0 us against 105.5 / 105.7 (H100, 2026-12-07).
template <typename Layout, typename Scheduler, uint32_t kBlockM, uint32_t kBlockN,
          uint32_t kStages, uint32_t kCluster, bool kLoadSfb, bool kPublishTiles = false, bool kLoadSfa = true,
          bool kTailMaps = false, bool kEvictFirstB = false, bool kRolledK = false>
__device__ __forceinline__ void producer_loop(const Layout& smem, Scheduler sched, uint32_t num_k_blocks,
                                              const CUtensorMap* tmap_a, const CUtensorMap* tmap_b,
                                              const CUtensorMap* tmap_sfa, const CUtensorMap* tmap_sfb,
                                              uint32_t stage_tx_bytes, TailMaps tail = {}) {
    static_assert(!kTailMaps || kCluster == 1, "tail boxes: cluster 1");
    constexpr uint32_t kSliceM = kBlockM / kCluster;
    const uint32_t rank = kCluster > 1 ? ptx::cluster_cta_rank() : 0;
    PipeState<kStages> pipe;
    const uint64_t b_policy = kEvictFirstB ? ptx::l2_evict_first() : 0;
    TileInfo tile{};  // kNormal leaves the grouped fields unset; the slot copies them all
    while (sched.next(tile)) {
        // Operand coordinates come from the scheduler (m-grouped variants offset B by the
        // group and masked SFA by group * k-blocks; kNormal: m_block * BLOCK_M, n0, kb).
        const int32_t m0 = static_cast<int32_t>(sched.a_row(tile));
        const int32_t n0 = static_cast<int32_t>(tile.n_block * kBlockN);
        const int32_t b0 = static_cast<int32_t>(sched.b_row(tile, static_cast<uint32_t>(n0)));
        const int32_t sfa_x = static_cast<int32_t>(sched.sfa_x(tile, static_cast<uint32_t>(m0)));
        const bool in_tail = kTailMaps && static_cast<uint32_t>(m0) >= tail.first_row;
        const CUtensorMap* map_a = in_tail ? tail.a : tmap_a;
        const CUtensorMap* map_sfa = in_tail ? tail.sfa : tmap_sfa;
        const uint32_t tx_bytes = in_tail ? tail.stage_tx_bytes : stage_tx_bytes;
        // Scheduler::kRank3Groups: A's row within the tile's group (its map is [G][rows][K]).
        [[maybe_unused]] int32_t a_y = 0;
        if constexpr (Scheduler::kRank3Groups) a_y = static_cast<int32_t>(sched.row_in_group(tile, static_cast<uint32_t>(m0)));
        const uint32_t producer_k_blocks = kRolledK ? ptx::opaque(num_k_blocks) : num_k_blocks;
        for (uint32_t kb = 0; kb < producer_k_blocks; ++kb, pipe.advance()) {
            const uint32_t s = pipe.stage;
            ptx::mbar_wait_watchdog(smem.empty(s), pipe.phase ^ 1u);
            uint64_t* full = smem.full(s);
            if constexpr (kPublishTiles) {
                if (kb == 0) write_tile_slot(smem.tile_slot(s), tile);
            }
            ptx::mbar_arrive_expect_tx(full, tx_bytes);
            const int32_t k0 = static_cast<int32_t>(kb * kBlockK);
            if constexpr (Scheduler::kRank3Groups) {
                static_assert(kCluster == 1 && !kTailMaps, "rank-3 A: the masked GEMM (cluster 1, no tail boxes)");
                ptx::tma_load_3d(smem.a(s), tmap_a, full, k0, a_y, static_cast<int32_t>(tile.group));
            } else if (kCluster > 1 && tile.multicast_a) {
                ptx::tma_load_2d_multicast(smem.a(s) + rank * kSliceM * kBlockK, tmap_a, full,
                                           k0, m0 + static_cast<int32_t>(rank * kSliceM),
                                           static_cast<uint16_t>((1u << kCluster) - 1));
            } else {
#pragma unroll
                for (uint32_t r = 0; r < kCluster; ++r)
                    ptx::tma_load_2d(smem.a(s) + r * kSliceM * kBlockK, map_a, full, k0,
                                     m0 + static_cast<int32_t>(r * kSliceM));
            }
            ptx::tma_load_2d<kEvictFirstB>(smem.b(s), tmap_b, full, k0, b0, b_policy);
            if constexpr (kLoadSfa)
                ptx::tma_load_2d(smem.sfa(s), map_sfa, full, sfa_x,
                                 static_cast<int32_t>(sched.sfa_y(tile, kb, num_k_blocks)));
            if constexpr (kLoadSfb)
                ptx::tma_load_2d(smem.sfb(s), tmap_sfb, full, n0, static_cast<int32_t>(kb));
            // Claimed tiles: the next one is claimed two K blocks before this tile's loads
            // end, so the atomic's round trip runs under the remaining waits.
            if constexpr (ClaimsTiles<Scheduler>) {
                if (kb + 2 == num_k_blocks || (num_k_blocks == 1 && kb == 0)) sched.claim_next();
            }
        }
    }
    if constexpr (kPublishTiles) {
        ptx::mbar_wait_watchdog(smem.empty(pipe.stage), pipe.phase ^ 1u);
        write_end_slot(smem.tile_slot(pipe.stage));
        ptx::mbar_arrive(smem.full(pipe.stage));
    }
}

// Issue one 128-wide K block for this warpgroup's 64 rows: four m64nNk32 wgmmas into a
// fresh accumulator, committed as one group (not waited for). desc_a / desc_b describe the
// stage's A rows of this warpgroup and its B tile (see StageDescs).
template <uint32_t kBlockN>
__device__ __forceinline__ void mma_k_block_issue(uint64_t desc_a, uint64_t desc_b, float (&acc)[kBlockN / 2]) {
    ptx::fence_operands(acc);
    ptx::wgmma_fence();
#pragma unroll
    for (uint32_t kk = 0; kk < kBlockK / kWgmmaK; ++kk)
        ptx::WgmmaE4M3<kBlockN>::mma(ptx::desc_advance(desc_a, kk * kWgmmaK),
                                     ptx::desc_advance(desc_b, kk * kWgmmaK), acc, kk > 0);
    ptx::wgmma_commit();
}

// Issue and wait: the accumulator is complete on return (the caller promotes it next).
template <uint32_t kBlockN>
__device__ __forceinline__ void mma_k_block(uint64_t desc_a, uint64_t desc_b, float (&acc)[kBlockN / 2]) {
    mma_k_block_issue<kBlockN>(desc_a, desc_b, acc);
    ptx::wgmma_wait<0>();
    ptx::fence_operands(acc);
}

// wgmma descriptors of stage 0, built once per kernel: stage s is the same descriptor with
// its start address advanced by s tiles (one 32-bit add), instead of a descriptor rebuilt
// from the stage's address on the path to every K block's first wgmma.
template <typename Layout>
struct StageDescs {
    uint64_t a0, b0;
    // slab: the first 64-row slab of A this warpgroup reads (its index when each warpgroup
    // owns one slab); should be warp-uniform (see the callers).
    __device__ __forceinline__ StageDescs(const Layout& smem, uint32_t slab)
        : a0(ptx::make_smem_desc_sw128(smem.a(0) + slab * 64 * kBlockK)),
          b0(ptx::make_smem_desc_sw128(smem.b(0))) {}
    __device__ __forceinline__ uint64_t a(uint32_t s) const { return ptx::desc_advance(a0, s * Layout::kABytes); }
    __device__ __forceinline__ uint64_t b(uint32_t s) const { return ptx::desc_advance(b0, s * Layout::kBBytes); }
};

}  // namespace deep_gemm::sm90
