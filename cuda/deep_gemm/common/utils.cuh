// Compile-time and device helpers used by the kernels.
#pragma once
#include <deep_gemm/common/stdint.cuh>

namespace deep_gemm {

template <typename T>
__host__ __device__ constexpr T ceil_div(T a, T b) { return (a + b - 1) / b; }

template <typename T>
__host__ __device__ constexpr T align_up(T a, T b) { return ceil_div(a, b) * b; }

// A shape dimension is either baked in at JIT time (nonzero template value) or taken
// from the kernel argument (template value 0).
template <uint32_t kCompiled>
__device__ __forceinline__ uint32_t shape_dim(uint32_t runtime_value) {
    return kCompiled != 0 ? kCompiled : runtime_value;
}

// Byte width of the epilogue swizzle for a row of `row_bytes`: the widest TMA swizzle
// (128, 64, 32 bytes) that tiles the row exactly. 0 means no swizzle fits.
__host__ __device__ constexpr uint32_t epilogue_swizzle_bytes(uint32_t row_bytes) {
    return row_bytes % 128 == 0 ? 128 : row_bytes % 64 == 0 ? 64 : row_bytes % 32 == 0 ? 32 : 0;
}

}  // namespace deep_gemm
