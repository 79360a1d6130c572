// stmatrix: a warp stores four 8x8 b16 matrices; lane i gives the address of row (i % 8)
// of matrix (i / 8), and register j of each lane holds its two elements of matrix j in
// the same fragment layout as an mma/wgmma accumulator row pair.
#pragma once
#include <deep_gemm/ptx/common.cuh>

namespace deep_gemm::ptx {

__device__ __forceinline__ void stmatrix_x4(uint32_t smem, uint32_t r0, uint32_t r1,
                                            uint32_t r2, uint32_t r3) {
    asm volatile("stmatrix.sync.aligned.x4.m8n8.shared.b16 [%0], {%1, %2, %3, %4};"
                 :: "r"(smem), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}

}  // namespace deep_gemm::ptx
