// Register reconfiguration, proxy fences, named barriers and cluster helpers.
#pragma once
#include <deep_gemm/ptx/common.cuh>

namespace deep_gemm::ptx {

// setmaxnreg: each warpgroup role gives back / takes registers (needs a register cap at
// entry: __launch_bounds__(threads, 1)).
template <uint32_t N>
__device__ __forceinline__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(N));
}
template <uint32_t N>
__device__ __forceinline__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(N));
}

// `x`, hidden from the optimizer: a loop bound through this is not known at compile time, so
// the loop stays rolled (NVCC 13.0 unrolled a producer loop of 8 compiled-in K blocks despite
// `#pragma unroll 1`).
__device__ __forceinline__ uint32_t opaque(uint32_t x) {
    asm volatile("" : "+r"(x));
    return x;
}

// Orders this thread's generic-proxy shared-memory writes (st.shared, stmatrix) before
// later async-proxy accesses (TMA store, wgmma operand reads).
__device__ __forceinline__ void fence_proxy_async_smem() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// st.shared of one word, kept by the compiler (see sm90::release_stage_after_reads).
__device__ __forceinline__ void st_shared_u32(uint32_t* p, uint32_t value) {
    asm volatile("st.shared.u32 [%0], %1;" :: "r"(smem_addr(p)), "r"(value) : "memory");
}

// Named barrier among `count` threads (a multiple of 32); id 0 is __syncthreads'.
__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t count) {
    asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(count) : "memory");
}

// Programmatic dependent launch: wait until the grids this one depends on have completed
// and their memory writes are visible. Must precede every global read of their outputs; a
// no-op in an ordinary launch.
__device__ __forceinline__ void wait_prior_grids() {
    asm volatile("griddepcontrol.wait;" ::: "memory");
}

__device__ __forceinline__ uint32_t cluster_cta_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

// Full cluster barrier: every thread of every CTA of the cluster arrives, then waits.
// Release/acquire make earlier shared-memory writes (barrier inits) visible cluster-wide.
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\t"
                 "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

__device__ __forceinline__ uint32_t cluster_num_ctas() {
    uint32_t n;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
    return n;
}

// Two floats at `local` (a shared-memory address of this CTA's layout) in the shared memory
// of cluster CTA `rank` (distributed shared memory).
__device__ __forceinline__ float2 ld_shared_cluster_f32x2(uint32_t local, uint32_t rank) {
    uint32_t remote;
    float2 v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
    asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(remote) : "memory");
    return v;
}

}  // namespace deep_gemm::ptx
