// deep_jit self-test: TMA and wgmma wrappers (inline PTX, sm_90a).
#pragma once

#include "mbarrier.cuh"

namespace djtest {

// Same layout as the driver's CUtensorMap (128 bytes, 64-byte aligned); the
// CUDA headers are not needed under NVRTC this way.
struct alignas(64) TmaDesc {
  unsigned long long words[16];
};

// 2-D TMA load of one box at (x = inner, y = outer) into shared memory,
// completing on `bar` with a transaction-byte count.
__device__ __forceinline__ void tma_load_2d(void* dst, const TmaDesc* desc, unsigned long long* bar, int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
      ::"r"(smem_addr(dst)), "l"(reinterpret_cast<unsigned long long>(desc)), "r"(x), "r"(y), "r"(smem_addr(bar))
      : "memory");
}

// wgmma shared-memory matrix descriptor for a K-major tile stored with the
// 32-byte swizzle (rows of 32 bytes, 8-row core groups 256 bytes apart).
__device__ __forceinline__ unsigned long long wgmma_desc_sw32(const void* tile) {
  unsigned long long addr = smem_addr(tile);
  unsigned long long desc = 0;
  desc |= (addr & 0x3FFFF) >> 4;          // bits 0-13: start address >> 4
  desc |= 1ULL << 16;                      // bits 16-29: leading byte offset >> 4 (unused here)
  desc |= (256ULL >> 4) << 32;             // bits 32-45: stride byte offset >> 4
  desc |= 3ULL << 62;                      // bits 62-63: 32-byte swizzle
  return desc;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }

// D(64x8, f32) = A(64x16, bf16, K-major) * B(16x8, bf16, K-major), overwriting D.
__device__ __forceinline__ void wgmma_m64n8k16_bf16(float (&d)[4], unsigned long long desc_a,
                                                    unsigned long long desc_b) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %6, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "l"(desc_a), "l"(desc_b), "r"(0)
      : "memory");
}

// Keeps the compiler from moving accumulator reads across the async wgmma.
__device__ __forceinline__ void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }

}  // namespace djtest
