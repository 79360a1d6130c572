// The SM90 warp-specialised pipeline every GEMM kernel shares: a ring of shared-memory stages
// filled by the TMA and guarded by a full and an empty mbarrier per stage, one producer
// warpgroup and one or two math warpgroups with their register budgets (setmaxnreg), the
// kernel's setup (tensor-map prefetch, barrier init, the wait for the previous grid), who a
// math thread is, and how a math warp hands a stage back. A family's kernel adds its
// shared-memory layout (full(s), empty(s) and its tiles), its producer loop, its MMA step
// and its epilogue.
#pragma once
#include <deep_gemm/common/tensor_map.cuh>
#include <deep_gemm/common/utils.cuh>
#include <deep_gemm/ptx/mbarrier.cuh>
#include <deep_gemm/ptx/sync.cuh>
#include <deep_gemm/ptx/tma.cuh>
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
// The producer's budget beside `num_math_wg` math warpgroups: one math warpgroup (64-row
// tiles, 256 threads) leaves room for 56, which the masked MN-major-B producer's load loop
// needs (at 40 ptxas kept two of its registers in local memory: 16 LDL / STL at 64 x 64).
constexpr uint32_t producer_regs(uint32_t num_math_wg) {
    return num_math_wg == 1 ? 56 : kProducerRegs;
}

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

// What every GEMM kernel does first: thread `leader` (the producer) prefetches the
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
