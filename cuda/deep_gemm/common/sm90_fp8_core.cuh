// Pieces shared by the SM90 FP8 block-scaled GEMM kernels (1D2D and 1D1D):
// shared-memory layout, the pipeline bookkeeping, the TMA producer loop and the
// per-128-K wgmma step. The impls add the scale promotion and the epilogue.
//
// Block layout: warpgroups 0 .. kNumMathWG-1 compute (64 rows of the tile each), the
// last warpgroup produces (one elected thread issues every TMA load).
#pragma once
#include <deep_gemm/common/tensor_map.cuh>
#include <deep_gemm/common/utils.cuh>
#include <deep_gemm/mma/wgmma_e4m3.cuh>
#include <deep_gemm/ptx/mbarrier.cuh>
#include <deep_gemm/ptx/tma.cuh>
#include <deep_gemm/ptx/sync.cuh>
#include <deep_gemm/ptx/wgmma.cuh>
#include <deep_gemm/scheduler/tile_scheduler.cuh>

namespace deep_gemm::ptx {

// Named barrier that also ANDs a predicate over the `count` participating threads:
// every thread gets true iff `pred` was true in all of them.
__device__ __forceinline__ bool named_barrier_and(uint32_t id, uint32_t count, bool pred) {
    uint32_t out;
    asm volatile("{\n\t.reg .pred q, p;\n\t"
                 "setp.ne.u32 q, %1, 0;\n\t"
                 "bar.red.and.pred p, %2, %3, q;\n\t"
                 "selp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(out) : "r"(static_cast<uint32_t>(pred)), "r"(id), "r"(count) : "memory");
    return out != 0;
}

}  // namespace deep_gemm::ptx

namespace deep_gemm::sm90 {

constexpr uint32_t kBlockK = 128;           // one scale block of K per pipeline stage
constexpr uint32_t kWgmmaK = 32;            // K of one fp8 wgmma
constexpr uint32_t kProducerRegs = 40;      // setmaxnreg for the TMA warpgroup
constexpr uint32_t kMathRegs = 232;         // setmaxnreg for the math warpgroups
// Registers per thread at entry: every entry is __launch_bounds__(384, 1), which gives 168
// (64K / 384 in multiples of 8). setmaxnreg.inc waits until the CTA holds the registers it
// asks for, so budgets over that allocation hang the kernel instead of failing it (seen
// with a 48-register producer beside 232-register math warpgroups, H200, 2026-12-01).
constexpr uint32_t kEntryRegs = 168;
constexpr bool register_budgets_fit(uint32_t num_math_threads, uint32_t producer_regs, uint32_t math_regs) {
    return 128 * producer_regs + num_math_threads * math_regs <= (128 + num_math_threads) * kEntryRegs;
}

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

// Whether the launch's dynamic shared memory holds Layout: the generated kernel source
// defines DG_SMEM_BYTES as the host's count (cpp/.../sm90_fp8_gemm.hpp, smem_bytes), so a
// mirror that fell behind the layout fails to compile instead of overrunning.
template <typename Layout>
constexpr bool launch_smem_fits() {
#ifdef DG_SMEM_BYTES
    return Layout::kDynamicBytes <= DG_SMEM_BYTES;
#else
    return true;
#endif
}

// Stage index and mbarrier phase parity of a ring of kStages buffers.
template <uint32_t kStages>
struct PipeState {
    uint32_t stage = 0, phase = 0;
    __device__ __forceinline__ void advance() {
        if (++stage == kStages) { stage = 0; phase ^= 1u; }
    }
};

// full[s]: 1 arrival (the producer's expect-tx) + the TMA bytes.
// empty[s]: one arrival per math warp of every CTA of the cluster (a multicast writes
// into the peer's stage too, so a stage is free only when both CTAs consumed it).
template <typename Layout, uint32_t kStages, uint32_t kNumMathWarps, uint32_t kCluster>
__device__ __forceinline__ void init_barriers(const Layout& smem) {
    for (uint32_t s = 0; s < kStages; ++s) {
        ptx::mbar_init(smem.full(s), 1);
        ptx::mbar_init(smem.empty(s), kNumMathWarps * kCluster);
    }
    ptx::fence_mbar_init();
}

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

// What every FP8 GEMM kernel does first: thread `leader` (the producer) prefetches the
// tensor maps and initialises the pipeline barriers, the CTA (or cluster) syncs, then all
// wait for the previous grid's writes. With programmatic dependent launch (set_pdl(True),
// or after our own scale conversion) the steps before the wait overlap the previous
// kernel's tail; nothing global is read before it. A no-op wait in an ordinary launch.
template <typename Layout, uint32_t kStages, uint32_t kNumMathWarps, uint32_t kCluster, typename... Maps>
__device__ __forceinline__ void gemm_kernel_setup(const Layout& smem, uint32_t leader, const Maps*... maps) {
    if (threadIdx.x == leader) {
        // Null maps (a kernel without tail boxes passes nullptr for them) are skipped: the
        // test folds away where the pointer is a constant.
        ((maps != nullptr ? ptx::tma_prefetch_map(maps) : void()), ...);
        init_barriers<Layout, kStages, kNumMathWarps, kCluster>(smem);
    }
    if constexpr (kCluster > 1) ptx::cluster_sync(); else __syncthreads();
    ptx::wait_prior_grids();
}

// Who a math thread is: its warpgroup, warp and lane, and its first accumulator row in the
// tile (wgmma m64: row_hi = row_lo + 8). The warpgroup index is read through a shuffle, so
// the compiler knows it is warp-uniform and keeps the A-tile address and the wgmma
// descriptors in uniform registers.
struct MathThread {
    uint32_t wg, warp, lane, row_lo;
};

__device__ __forceinline__ MathThread math_thread() {
    const uint32_t wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0);
    const uint32_t warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    return {wg, warp, lane, wg * 64 + warp * 16 + lane / 4};
}

// The next tile of the math warpgroups, from the slot of stage `pipe` (the stage of the
// tile's first K block; see producer_loop): false at the end mark. The wait is one asm
// statement and the slot a load from a warp-uniform address, so the tile loop stays
// warp-uniform to the compiler. Waiting again on the same phase in the K loop is free.
template <typename Layout, uint32_t kStages>
__device__ __forceinline__ bool fetch_published_tile(const Layout& smem, const PipeState<kStages>& pipe,
                                                     TileInfo& tile) {
    ptx::mbar_wait_uniform(smem.full(pipe.stage), pipe.phase);
    return read_tile_slot(smem.tile_slot(pipe.stage), tile);
}

// Schedulers that claim their tiles at run time (TileScheduler's kDynamic) declare
// kClaimsTiles = true; the others (dense, k-grouped) do not declare it.
template <typename Scheduler>
concept ClaimsTiles = Scheduler::kClaimsTiles;

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
template <typename Layout, typename Scheduler, uint32_t kBlockM, uint32_t kBlockN,
          uint32_t kStages, uint32_t kCluster, bool kLoadSfb, bool kPublishTiles = false, bool kLoadSfa = true,
          bool kTailMaps = false>
__device__ __forceinline__ void producer_loop(const Layout& smem, Scheduler sched, uint32_t num_k_blocks,
                                              const CUtensorMap* tmap_a, const CUtensorMap* tmap_b,
                                              const CUtensorMap* tmap_sfa, const CUtensorMap* tmap_sfb,
                                              uint32_t stage_tx_bytes, TailMaps tail = {}) {
    static_assert(!kTailMaps || kCluster == 1, "tail boxes: cluster 1");
    constexpr uint32_t kSliceM = kBlockM / kCluster;
    const uint32_t rank = kCluster > 1 ? ptx::cluster_cta_rank() : 0;
    PipeState<kStages> pipe;
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
        for (uint32_t kb = 0; kb < num_k_blocks; ++kb, pipe.advance()) {
            const uint32_t s = pipe.stage;
            ptx::mbar_wait_watchdog(smem.empty(s), pipe.phase ^ 1u);
            uint64_t* full = smem.full(s);
            if constexpr (kPublishTiles) {
                if (kb == 0) write_tile_slot(smem.tile_slot(s), tile);
            }
            ptx::mbar_arrive_expect_tx(full, tx_bytes);
            const int32_t k0 = static_cast<int32_t>(kb * kBlockK);
            if (kCluster > 1 && tile.multicast_a) {
                ptx::tma_load_2d_multicast(smem.a(s) + rank * kSliceM * kBlockK, tmap_a, full,
                                           k0, m0 + static_cast<int32_t>(rank * kSliceM),
                                           static_cast<uint16_t>((1u << kCluster) - 1));
            } else {
#pragma unroll
                for (uint32_t r = 0; r < kCluster; ++r)
                    ptx::tma_load_2d(smem.a(s) + r * kSliceM * kBlockK, map_a, full, k0,
                                     m0 + static_cast<int32_t>(r * kSliceM));
            }
            ptx::tma_load_2d(smem.b(s), tmap_b, full, k0, b0);
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

// A math warp hands stage s back: one arrival per warp on the empty barrier of every CTA
// of the cluster (its own twice if the peer has no tile, so the count still completes).
template <uint32_t kCluster>
__device__ __forceinline__ void release_stage(uint64_t* empty, uint32_t lane, bool peer_alive) {
    if constexpr (kCluster == 1) {
        if (lane == 0) ptx::mbar_arrive(empty);
    } else {
        if (lane < kCluster) ptx::mbar_arrive_cluster(empty, peer_alive ? lane : ptx::cluster_cta_rank());
    }
}

// release_stage, once this warp's shared-memory reads of the stage (LDS of its scales) are
// back in registers. `reads` is any value computed from all of them (e.g. the XOR of their
// bits); storing it into the thread's word cannot issue before they are, and the arrive issues
// after the store. Without this, ptxas (CUDA 13.0) may issue the arrive while an LDS is still
// queued, and the TMA refill (async proxy) of the stage can overtake it: measured on the H200
// while the other warpgroup's epilogue kept the LSU busy, even for an LDS issued before the
// wgmmas (2026-12-01; docs/design-notes.md). A proxy fence also orders them, but costs a MEMBAR that
// waits for every outstanding load of the warp (2-7% slower).
template <uint32_t kCluster>
__device__ __forceinline__ void release_stage_after_reads(uint64_t* empty, uint32_t* word, uint32_t reads,
                                                          uint32_t lane, bool peer_alive) {
    ptx::st_shared_u32(word, reads);  // every lane, each to its own word: no branch around it
    release_stage<kCluster>(empty, lane, peer_alive);
}

// XOR of the bits of every element: a value that depends on all of them (see above).
template <typename... Floats>
__device__ __forceinline__ uint32_t bits_of(Floats... v) {
    return (__float_as_uint(v) ^ ...);
}

}  // namespace deep_gemm::sm90
