// TMA (cp.async.bulk.tensor) wrappers: 2D (and batched 3D) tile loads into shared memory completing on an
// mbarrier (optionally multicast to several CTAs of the cluster), 2D (and batched 3D) tile stores
// from shared memory with bulk-group completion, and tensor-map prefetch.
#pragma once
#include <deep_gemm/ptx/common.cuh>

namespace deep_gemm::ptx {

__device__ __forceinline__ void tma_prefetch_map(const void* tmap) {
    asm volatile("prefetch.tensormap [%0];" :: "l"(reinterpret_cast<uint64_t>(tmap)) : "memory");
}

// Load the box at element coordinates (x = inner, y = outer) into `dst`; the bytes are
// counted against `bar`'s expected transaction count. Out-of-bounds elements read as zero
// and still count. kEvictFirst: the box's lines are L2's first to go (`l2_evict_first`), for
// operands read once, so that streaming them evicts them rather than other data.
template <bool kEvictFirst = false>
__device__ __forceinline__ void tma_load_2d(void* dst, const void* tmap, uint64_t* bar,
                                            int32_t x, int32_t y, uint64_t policy = 0) {
    if constexpr (kEvictFirst) {
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
            " [%0], [%1, {%3, %4}], [%2], %5;"
            :: "r"(smem_addr(dst)), "l"(reinterpret_cast<uint64_t>(tmap)), "r"(smem_addr(bar)),
               "r"(x), "r"(y), "l"(policy) : "memory");
    } else {
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
            " [%0], [%1, {%3, %4}], [%2];"
            :: "r"(smem_addr(dst)), "l"(reinterpret_cast<uint64_t>(tmap)), "r"(smem_addr(bar)),
               "r"(x), "r"(y) : "memory");
    }
}

// The L2 cache policy of tma_load_2d<true>: every line it loads evicted first.
__device__ __forceinline__ uint64_t l2_evict_first() {
    uint64_t policy;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    return policy;
}

// Same, but the box lands at the same smem offset in every CTA of `cta_mask` and signals
// the mbarrier at `bar`'s offset in each of them.
template <bool kEvictFirst = false>
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const void* tmap, uint64_t* bar,
                                                      int32_t x, int32_t y, uint16_t cta_mask, uint64_t policy = 0) {
    if constexpr (kEvictFirst) {
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
            ".multicast::cluster.L2::cache_hint [%0], [%1, {%3, %4}], [%2], %5, %6;"
            :: "r"(smem_addr(dst)), "l"(reinterpret_cast<uint64_t>(tmap)), "r"(smem_addr(bar)),
               "r"(x), "r"(y), "h"(cta_mask), "l"(policy) : "memory");
    } else {
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
            ".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;"
            :: "r"(smem_addr(dst)), "l"(reinterpret_cast<uint64_t>(tmap)), "r"(smem_addr(bar)),
               "r"(x), "r"(y), "h"(cta_mask) : "memory");
    }
}

// A 3-D box at (x, y, z) (z: a batch index of a rank-3 map whose box is 1 deep), as tma_load_2d.
__device__ __forceinline__ void tma_load_3d(void* dst, const void* tmap, uint64_t* bar, int32_t x, int32_t y,
                                            int32_t z) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4, %5}], [%2];"
        :: "r"(smem_addr(dst)), "l"(reinterpret_cast<uint64_t>(tmap)), "r"(smem_addr(bar)),
           "r"(x), "r"(y), "r"(z) : "memory");
}

// Store the box at (x, y) from `src`; elements outside the tensor are clipped by the TMA.
__device__ __forceinline__ void tma_store_2d(const void* tmap, const void* src, int32_t x, int32_t y) {
    asm volatile(
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
        :: "l"(reinterpret_cast<uint64_t>(tmap)), "r"(smem_addr(src)), "r"(x), "r"(y) : "memory");
}

// A 3-D box at (x, y, z) (z: a batch index of a rank-3 map whose box is 1 deep), as tma_store_2d.
__device__ __forceinline__ void tma_store_3d(const void* tmap, const void* src, int32_t x, int32_t y, int32_t z) {
    asm volatile(
        "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];"
        :: "l"(reinterpret_cast<uint64_t>(tmap)), "r"(smem_addr(src)), "r"(x), "r"(y), "r"(z) : "memory");
}

__device__ __forceinline__ void tma_store_commit() {
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// Wait until at most N committed store groups still read their shared-memory source.
template <int N>
__device__ __forceinline__ void tma_store_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory");
}

// Wait until at most N committed store groups are still incomplete (writes visible).
template <int N>
__device__ __forceinline__ void tma_store_wait() {
    asm volatile("cp.async.bulk.wait_group %0;" :: "n"(N) : "memory");
}

}  // namespace deep_gemm::ptx
