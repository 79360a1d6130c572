// mbarrier wrappers (PTX ISA "mbarrier"): init, arrive, expect-tx, parity wait,
// and the cluster-remote arrive used when a TMA multicast feeds two CTAs.
#pragma once
#include <deep_gemm/ptx/common.cuh>

namespace deep_gemm::ptx {

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem_addr(bar)), "r"(count));
}

// Makes the inits visible to the async proxy (TMA) and to the other CTAs of the cluster.
__device__ __forceinline__ void fence_mbar_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(smem_addr(bar)) : "memory");
}

// Arrive on the barrier at the same smem offset in CTA `cta_rank` of this cluster.
// Default (release, CTA-scope) semantics: the only thing ordered is the end of this warp's
// wgmma reads, already complete; a cluster-scope release would cost a heavier fence.
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, uint32_t cta_rank) {
    asm volatile(
        "{\n\t.reg .b32 remote;\n\t"
        "mapa.shared::cluster.u32 remote, %0, %1;\n\t"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n\t}"
        :: "r"(smem_addr(bar)), "r"(cta_rank) : "memory");
}

// One arrival plus `bytes` expected transaction bytes (the TMA loads of this phase).
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 :: "r"(smem_addr(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(uint64_t* bar, uint32_t parity) {
    uint32_t ok;
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(ok) : "r"(smem_addr(bar)), "r"(parity) : "memory");
    return ok != 0;
}

// Blocks until the phase with the given parity has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
    while (!mbar_try_wait(bar, parity)) {}
}

// The same wait as one asm statement: its spin loop is PTX the compiler cannot see, so a
// wait whose outcome steers the tile loop leaves that loop warp-uniform to it (a C++ loop
// there moved every wgmma descriptor out of the uniform registers, H200, 2026-11-30).
// Labels inside the braces are local to the block, so the statement can be inlined often.
__device__ __forceinline__ void mbar_wait_uniform(uint64_t* bar, uint32_t parity) {
    asm volatile(
        "{\n\t.reg .pred done;\n"
        "WAIT_AGAIN:\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t"
        "@!done bra WAIT_AGAIN;\n\t}"
        :: "r"(smem_addr(bar)), "r"(parity) : "memory");
}

// The producer's wait. With DG_MBAR_TIMEOUT defined (test harness builds) a wait that spins
// far longer than any real stall traps, so a protocol bug fails fast instead of hanging the
// GPU (a stuck consumer stalls the producer too). Only the producer carries the counter:
// the math warpgroups' register allocation stays identical to the production build.
__device__ __forceinline__ void mbar_wait_watchdog(uint64_t* bar, uint32_t parity) {
#ifdef DG_MBAR_TIMEOUT
    uint32_t spins = 0;
    while (!mbar_try_wait(bar, parity)) {
        if (++spins == (1u << 24)) __trap();
    }
#else
    mbar_wait(bar, parity);
#endif
}

}  // namespace deep_gemm::ptx
