// Small helpers shared by the PTX wrappers: shared-memory address conversion, L1 prefetch.
#pragma once
#include <deep_gemm/common/stdint.cuh>

namespace deep_gemm::ptx {

// 32-bit shared-state-space address of a generic pointer into shared memory.
// Every shared-memory operand of the PTX below takes this form.
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Pulls the line holding `p` into this SM's L1 without waiting for it (a later load
// then hits L1 instead of paying the L2 round trip on its critical path).
__device__ __forceinline__ void prefetch_l1(const void* p) {
    asm volatile("prefetch.global.L1 [%0];" :: "l"(p));
}

}  // namespace deep_gemm::ptx
