// Issue-rate probe: FP32 -> packed bf16 conversions (cvt.rn.bf16x2.f32, SASS F2FP) against
// FFMA, per SM and clock. Question it answers: is a 1D2D tile's epilogue (one F2FP per two
// outputs: 16384 per 256x128 tile) bound by the conversion rate?
//   nvcc -arch=sm_90a -O3 -o /tmp/cvt tools/device/cvt_throughput.cu && /tmp/cvt
#include <cstdio>
#include <cuda_bf16.h>

constexpr int kIters = 4096, kChains = 8;

__global__ void cvt_kernel(const float* in, unsigned* out, long long* clocks) {
    float a[kChains], b[kChains];
    unsigned acc = 0;
    for (int c = 0; c < kChains; ++c) a[c] = in[threadIdx.x % 32 + c], b[c] = in[threadIdx.x % 32 + c + 8];
    __syncthreads();
    const long long t0 = clock64();
    for (int i = 0; i < kIters; ++i) {
#pragma unroll
        for (int c = 0; c < kChains; ++c) {
            unsigned r;
            asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(a[c]), "f"(b[c]));
            acc ^= r;
            a[c] = __uint_as_float(__float_as_uint(a[c]) ^ (r & 1u));  // keep inputs live, 1 LOP each
        }
    }
    __syncthreads();
    const long long t1 = clock64();
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
    if (threadIdx.x == 0) clocks[blockIdx.x] = t1 - t0;
}

__global__ void ffma_kernel(const float* in, unsigned* out, long long* clocks) {
    float a[kChains];
    for (int c = 0; c < kChains; ++c) a[c] = in[threadIdx.x % 32 + c];
    const float s = in[40], t = in[41];
    __syncthreads();
    const long long t0 = clock64();
    for (int i = 0; i < kIters; ++i) {
#pragma unroll
        for (int c = 0; c < kChains; ++c) a[c] = fmaf(a[c], s, t);
    }
    __syncthreads();
    const long long t1 = clock64();
    float acc = 0;
    for (int c = 0; c < kChains; ++c) acc += a[c];
    out[blockIdx.x * blockDim.x + threadIdx.x] = __float_as_uint(acc);
    if (threadIdx.x == 0) clocks[blockIdx.x] = t1 - t0;
}

int main() {
    float* in; unsigned* out; long long* clocks;
    cudaMalloc(&in, 64 * sizeof(float));
    cudaMemset(in, 0x3f, 64 * sizeof(float));
    cudaMalloc(&out, 132 * 1024 * sizeof(unsigned));
    cudaMalloc(&clocks, 132 * sizeof(long long));
    for (int threads : {128, 256, 512, 1024}) {
        for (int which = 0; which < 2; ++which) {
            for (int rep = 0; rep < 2; ++rep) {
                if (which == 0) cvt_kernel<<<132, threads>>>(in, out, clocks);
                else ffma_kernel<<<132, threads>>>(in, out, clocks);
            }
            long long h[132];
            cudaMemcpy(h, clocks, sizeof(h), cudaMemcpyDeviceToHost);
            long long mx = 0;
            for (long long v : h) mx = v > mx ? v : mx;
            const double ops = static_cast<double>(threads) * kIters * kChains;
            printf("%s threads/SM %4d: %.1f per SM per clock (%lld clk)\n", which == 0 ? "F2FP(bf16x2)" : "FFMA        ",
                   threads, ops / mx, mx);
        }
    }
    const cudaError_t e = cudaDeviceSynchronize();
    printf("status: %s\n", cudaGetErrorString(e));
    return e != cudaSuccess;
}
