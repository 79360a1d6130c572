// wgmma support: shared-memory matrix descriptors, fence / commit / wait, and the
// register "fence" that stops the compiler from touching accumulators while a wgmma
// that writes them is still in flight.
#pragma once
#include <deep_gemm/ptx/common.cuh>

namespace deep_gemm::ptx {

// Matrix descriptor for a K-major operand tile stored with the 128-byte swizzle, as the
// TMA writes it: rows of 128 bytes, 8-row core groups 1024 bytes apart (stride byte
// offset), leading byte offset unused for swizzled K-major layouts.
// Bits: [0,14) start address >> 4, [16,30) LBO >> 4, [32,46) SBO >> 4, [62,64) swizzle
// mode (1 = 128B). The tile base must be 1024-byte aligned; stepping K by 32 fp8
// elements inside the 128-byte row is start address + 32 bytes (the hardware applies
// the same address-based XOR as the TMA did).
__device__ __forceinline__ uint64_t make_smem_desc_sw128(const void* tile) {
    const uint64_t addr = smem_addr(tile);
    uint64_t desc = 0;
    desc |= (addr & 0x3FFFFull) >> 4;
    desc |= static_cast<uint64_t>(1024 >> 4) << 32;
    desc |= 1ull << 62;
    return desc;
}

// Advance a descriptor's start address by `bytes` (a multiple of 16).
// Only the low word changes: the 14-bit start-address field cannot carry into bit 14 for
// any shared-memory address (< 256 KB), so a 32-bit add is exact. A 64-bit add compiles to
// an add-with-carry pair plus two R2UR moves per wgmma on the path to every QGMMA; the
// 32-bit form keeps the high word a constant and the low word in a uniform register.
__device__ __forceinline__ uint64_t desc_advance(uint64_t desc, uint32_t bytes) {
    const uint32_t lo = static_cast<uint32_t>(desc) + (bytes >> 4);
    return (desc & 0xFFFFFFFF00000000ull) | lo;
}

// Must precede the first wgmma of a batch whose accumulators were touched by ordinary
// instructions (and orders prior smem writes for the wgmma operand reads).
__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory");
}

// Compiler-level fence on one register: its value may change here (async wgmma write),
// so no read or write of it may be moved across this point.
__device__ __forceinline__ void fence_operand(float& r) {
    asm volatile("" : "+f"(r) :: "memory");
}

template <int N>
__device__ __forceinline__ void fence_operands(float (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) fence_operand(r[i]);
}

}  // namespace deep_gemm::ptx
