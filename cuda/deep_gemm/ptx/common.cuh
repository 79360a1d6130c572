// Small helpers shared by the PTX wrappers: shared-memory address conversion.
#pragma once
#include <deep_gemm/common/stdint.cuh>

namespace deep_gemm::ptx {

// 32-bit shared-state-space address of a generic pointer into shared memory.
// Every shared-memory operand of the PTX below takes this form.
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

}  // namespace deep_gemm::ptx
