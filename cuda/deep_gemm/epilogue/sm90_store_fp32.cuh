// Epilogue: an FP32 result tile of the SM90 wgmma accumulator layout stored into a row-major
// FP32 D, optionally accumulated onto C (which may be D itself), with 8-byte stores of column
// pairs; rows >= M and columns >= N are left alone. For every kernel family with an FP32 D.
#pragma once
#include <deep_gemm/common/stdint.cuh>

namespace deep_gemm::epilogue {

// c[row, col..col+1]; zeros past M or N (a pair straddling N loads its one column).
__device__ __forceinline__ float2 load_pair(const float* c, uint32_t ld, uint32_t row, uint32_t col, uint32_t m,
                                            uint32_t n) {
    if (row >= m || col >= n) return make_float2(0.0f, 0.0f);
    const size_t idx = static_cast<size_t>(row) * ld + col;
    if (col + 1 < n) return *reinterpret_cast<const float2*>(c + idx);
    return make_float2(c[idx], 0.0f);
}

// d[row, col..col+1] = v, clipped at M and N.
__device__ __forceinline__ void store_pair(float* d, uint32_t ld, uint32_t row, uint32_t col, uint32_t m, uint32_t n,
                                           float2 v) {
    if (row >= m || col >= n) return;
    const size_t idx = static_cast<size_t>(row) * ld + col;
    if (col + 1 < n) *reinterpret_cast<float2*>(d + idx) = v;
    else d[idx] = v.x;
}

// d = c + result for this thread's rows r and r + 8 of the tile starting at column n0.
// All of the thread's C values are loaded before its first store. c may be d, so the
// compiler cannot hoist a load of C above an earlier store of D: taken pair by pair, each
// pair waited one memory latency (64 per tile at BLOCK_N 128). Each element is read and
// written by the same thread only, so loading them all first is exact. Measured on the H200
// (2026-12-01, with the K loop of 482728d): k-grouped wgrad 553 -> 708
// TFLOP/s, dense 4096x7168x2048 with FP32 += 376 -> 230 us.
template <uint32_t kBlockN>
__device__ __forceinline__ void store_tile(const float (&result)[kBlockN / 2], float* d, const float* c, uint32_t ld,
                                           uint32_t r, uint32_t n0, uint32_t m, uint32_t n, uint32_t lane) {
    float2 prev[kBlockN / 4];
#pragma unroll
    for (uint32_t j = 0; j < kBlockN / 8; ++j) {
        const uint32_t col = n0 + j * 8 + (lane % 4) * 2;
        prev[2 * j + 0] = c != nullptr ? load_pair(c, ld, r, col, m, n) : make_float2(0.0f, 0.0f);
        prev[2 * j + 1] = c != nullptr ? load_pair(c, ld, r + 8, col, m, n) : make_float2(0.0f, 0.0f);
    }
#pragma unroll
    for (uint32_t j = 0; j < kBlockN / 8; ++j) {
        const uint32_t col = n0 + j * 8 + (lane % 4) * 2;
        store_pair(d, ld, r, col, m, n,
                   make_float2(prev[2 * j + 0].x + result[4 * j + 0], prev[2 * j + 0].y + result[4 * j + 1]));
        store_pair(d, ld, r + 8, col, m, n,
                   make_float2(prev[2 * j + 1].x + result[4 * j + 2], prev[2 * j + 1].y + result[4 * j + 3]));
    }
}

}  // namespace deep_gemm::epilogue
