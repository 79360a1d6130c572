// Scale-factor layout kernel: any-strided fp32 scales [groups, mn, kb] into the
// MN-major, TMA-aligned layout the GEMMs load ([groups, kb, align(mn, 4)]).
// Writes are coalesced along mn; the pad rows get zeros so the buffer is
// fully defined.
#pragma once

#include <deep_gemm/common/stdint.cuh>

namespace deep_gemm {

__device__ __forceinline__ void mn_major_sf_impl(const float* in, float* out, uint32_t mn, uint32_t kb,
                                                 int64_t stride_g, int64_t stride_mn, int64_t stride_k,
                                                 uint32_t out_ld) {
    // The GEMM launched right after this kernel (with programmatic dependent launch) may
    // start its setup now; it waits for this grid's writes before reading them.
    asm volatile("griddepcontrol.launch_dependents;");
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    const uint32_t j = blockIdx.y;
    const uint32_t g = blockIdx.z;
    if (i >= out_ld) return;
    const float v = i < mn ? in[g * stride_g + int64_t(i) * stride_mn + int64_t(j) * stride_k] : 0.0f;
    out[(uint64_t(g) * kb + j) * out_ld + i] = v;
}

}  // namespace deep_gemm
