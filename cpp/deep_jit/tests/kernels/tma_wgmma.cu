// deep_jit self-test kernel (sm_90a): one CTA loads A (64x16 bf16) and
// B (8x16 bf16) with TMA into 32-byte-swizzled shared memory, waits on an
// mbarrier, and computes D = A * B^T (64x8, f32) with one wgmma.
#include "djtest/ptx.cuh"

#ifndef DJ_TAG
#define DJ_TAG 0
#endif

extern "C" __global__ void __launch_bounds__(128, 1)
djtest_tma_wgmma(const __grid_constant__ djtest::TmaDesc tmap_a, const __grid_constant__ djtest::TmaDesc tmap_b,
                 float* out) {
  __shared__ __align__(1024) unsigned short smem_a[64 * 16];
  __shared__ __align__(1024) unsigned short smem_b[8 * 16];
  __shared__ __align__(8) unsigned long long bar;
  const unsigned tid = threadIdx.x;

  if (tid == 0) djtest::mbarrier_init(&bar, 1);
  __syncthreads();
  if (tid == 0) {
    djtest::mbarrier_arrive_expect_tx(&bar, sizeof(smem_a) + sizeof(smem_b));
    djtest::tma_load_2d(smem_a, &tmap_a, &bar, 0, 0);
    djtest::tma_load_2d(smem_b, &tmap_b, &bar, 0, 0);
  }
  djtest::mbarrier_wait(&bar, 0);

  float d[4] = {0.f, 0.f, 0.f, 0.f};
  for (float& r : d) djtest::fence_operand(r);
  djtest::wgmma_fence();
  djtest::wgmma_m64n8k16_bf16(d, djtest::wgmma_desc_sw32(smem_a), djtest::wgmma_desc_sw32(smem_b));
  djtest::wgmma_commit();
  djtest::wgmma_wait_all();
  for (float& r : d) djtest::fence_operand(r);

  // Accumulator layout of m64nNk16: warp w owns rows 16w..16w+15; lane l holds
  // columns 2(l%4), 2(l%4)+1 of rows 16w + l/4 and 16w + l/4 + 8.
  const unsigned warp = tid / 32, lane = tid % 32;
  const unsigned row = warp * 16 + lane / 4, col = (lane % 4) * 2;
  out[row * 8 + col] = d[0] + DJ_TAG * 0.0f;
  out[row * 8 + col + 1] = d[1];
  out[(row + 8) * 8 + col] = d[2];
  out[(row + 8) * 8 + col + 1] = d[3];
}
