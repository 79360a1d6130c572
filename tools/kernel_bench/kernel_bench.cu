// Standalone harness for the SM90 FP8 GEMM kernels (1D2D and 1D1D).
//
//   kernel_bench gen DIR            write the JIT entry sources of every case to DIR/<name>.cu
//                                   and their names to DIR/kernels.txt (compile them to
//                                   DIR/<name>.cubin with nvcc -cubin, see run_on_device.sh)
//   kernel_bench run DIR [SUITE]    SUITE = all | check | check1d2d | check1d1d | forced | bench
//
// Each case: fresh random e4m3 inputs with random positive scales, D poisoned (0xFF bytes =
// NaN) with guard bytes around it and a row gap (ld > n) for some cases, launched exactly as
// the launcher will (cuTensorMapEncodeTiled + cuLaunchKernelEx with the cluster attribute),
// compared with a naive fp32 reference over the dequantised inputs by
// calc_diff = 1 - 2 sum(xy) / sum(x^2 + y^2) (< 1e-3), guards and gaps checked, run twice and
// compared bitwise. Bench cases are then timed: 256 MB L2 flush before each launch, CUDA
// events, median of 40.
//
// No link-time libcuda: driver entry points come through cudaGetDriverEntryPointByVersion,
// as the product does.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "../../cpp/deep_gemm/launch/sm90_fp8_source.hpp"

using namespace deep_gemm::heuristics;
using namespace deep_gemm::launch;

#define CHECK_CUDA(x)                                                                          \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e_), __FILE__, \
                    __LINE__, #x);                                                             \
            exit(2);                                                                           \
        }                                                                                      \
    } while (0)

#define CHECK_CU(x)                                                                             \
    do {                                                                                        \
        CUresult r_ = (x);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                               \
            fprintf(stderr, "driver error %d at %s:%d: %s\n", (int)r_, __FILE__, __LINE__, #x); \
            exit(2);                                                                            \
        }                                                                                       \
    } while (0)

// ------------------------------------------------------------------------------------------
// Driver entry points
struct Driver {
    decltype(&cuModuleLoadData) moduleLoadData;
    decltype(&cuModuleGetFunction) moduleGetFunction;
    decltype(&cuFuncSetAttribute) funcSetAttribute;
    decltype(&cuLaunchKernelEx) launchKernelEx;
    decltype(&cuTensorMapEncodeTiled) tensorMapEncodeTiled;
    decltype(&cuOccupancyMaxActiveClusters) occupancyMaxActiveClusters;

    template <typename T>
    static void load(T& fn, const char* name) {
        cudaDriverEntryPointQueryResult q;
        void* p = nullptr;
        CHECK_CUDA(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q));
        if (q != cudaDriverEntryPointSuccess || p == nullptr) {
            fprintf(stderr, "driver symbol %s not found\n", name);
            exit(2);
        }
        fn = reinterpret_cast<T>(p);
    }
    void init() {
        load(moduleLoadData, "cuModuleLoadData");
        load(moduleGetFunction, "cuModuleGetFunction");
        load(funcSetAttribute, "cuFuncSetAttribute");
        load(launchKernelEx, "cuLaunchKernelEx");
        load(tensorMapEncodeTiled, "cuTensorMapEncodeTiled");
        load(occupancyMaxActiveClusters, "cuOccupancyMaxActiveClusters");
    }
};
static Driver drv;

// ------------------------------------------------------------------------------------------
// Cases
struct Case {
    std::string suite;  // "check1d2d", "check1d1d", "forced" or "bench"
    bool fp32_out;      // 1D1D
    int m, n, k;
    int cm, cn, ck;     // compiled dims (0 = runtime)
    Sm90Fp8GemmConfig cfg;
    int ld_pad;         // D row pitch = n + ld_pad elements
    bool alias;         // 1D1D: C is D
    std::string note;
};

static int g_num_sms = 132;

static Sm90Fp8KernelSpec kernel_spec(const Case& c) { return sm90_fp8_gemm_kernel(c.cfg, c.cm, c.cn, c.ck); }
static std::string kernel_name(const Case& c) { return sm90_fp8_kernel_name(kernel_spec(c)); }

static Case make_case(const std::string& suite, bool fp32, int m, int n, int k, int ld_pad, bool alias,
                      const char* note = "", int force_bm = 0, int force_bn = 0, int force_cl = 0,
                      bool runtime_dims = false) {
    Case c{suite, fp32, m, n, k, 0, runtime_dims ? 0 : n, runtime_dims ? 0 : k, {}, ld_pad, alias, note};
    c.cfg = force_bm ? make_sm90_fp8_gemm_config(fp32, force_bm, force_bn, force_cl, m, n, k, g_num_sms)
                     : choose_sm90_fp8_gemm_config(m, n, k, g_num_sms, fp32);
    return c;
}

static std::vector<Case> build_cases() {
    std::vector<Case> cases;
    const int ms[] = {1, 7, 128, 129, 4096, 4097};
    const int nks[][2] = {{2112, 7168}, {576, 7168}, {24576, 1536}, {32768, 512},
                          {7168, 16384}, {4096, 7168}, {7168, 2048}};
    int idx = 0;
    for (bool fp32 : {false, true})
        for (int m : ms)
            for (auto& nk : nks) {
                ++idx;
                cases.push_back(make_case(fp32 ? "check1d1d" : "check1d2d", fp32, m, nk[0], nk[1], idx % 3 == 0 ? 8 : 0,
                                          fp32 && idx % 2 == 0));
            }
    // Forced configurations: both cluster paths, SFB straddling tiles, block_m 64 at large M,
    // odd n-block counts (peer without a tile / pairs on two m-blocks), runtime dims.
    const struct { bool fp32; int m, n, k, bm, bn, cl; bool rt; } forced[] = {
        {false, 4097, 2112, 7168, 128, 112, 2, false}, {false, 4097, 2112, 7168, 128, 144, 1, false},
        {false, 4097, 2112, 7168, 128, 160, 2, false}, {false, 1000, 7168, 2048, 64, 96, 2, false},
        {false, 129, 576, 7168, 128, 48, 2, false},    {false, 4097, 7168, 2048, 128, 128, 1, true},
        {false, 333, 2112, 1536, 128, 80, 2, true},    {false, 4096, 7168, 16384, 128, 128, 2, false},
        {true, 4097, 2112, 7168, 128, 112, 2, false},  {true, 4097, 7168, 2048, 128, 160, 1, true},
        {true, 77, 576, 1536, 64, 32, 2, false},
        // block_m 256 (two slabs per warpgroup) and block_n 192 (since v5).
        {false, 4097, 7168, 2048, 256, 128, 1, false}, {false, 4097, 2112, 7168, 256, 112, 2, false},
        {false, 333, 2112, 1536, 256, 64, 1, true},    {false, 4097, 24576, 1536, 128, 192, 1, false},
        {false, 129, 2112, 7168, 128, 192, 2, false},
    };
    for (int m : {129, 4097}) {  // two-K-blocks-in-flight path, odd and even K block counts
        Case c = make_case("forced", false, m, 2112, m == 129 ? 1536 + 128 : 7168, 8, false, "overlap", 128, 128, 1);
        c.cfg.mma_overlap = true;
        cases.push_back(c);
        c.cfg.mma_overlap = false;  // and the plain schedule on the same shapes
        c.note = "no overlap";
        cases.push_back(c);
    }
    for (auto& f : forced)
        cases.push_back(make_case("forced", f.fp32, f.m, f.n, f.k, 8, f.fp32, "forced", f.bm, f.bn, f.cl, f.rt));
    // Bench: BENCH.md's nine shapes (1D2D), the model's choice plus its next three.
    const int bench[][3] = {{128, 2112, 7168},  {128, 24576, 1536},  {128, 7168, 16384},
                            {128, 4096, 7168},  {4096, 2112, 7168},  {4096, 24576, 1536},
                            {4096, 7168, 16384}, {4096, 4096, 7168}, {4096, 7168, 2048}};
    for (auto& s : bench) {
        auto ranked = rank_sm90_fp8_gemm_configs(s[0], s[1], s[2], g_num_sms, false);
        std::vector<std::string> seen;
        auto add = [&](const Sm90Fp8GemmConfig& cfg, const char* note) {
            if (cfg.block_m == 0) return;
            Case c = make_case("bench", false, s[0], s[1], s[2], 0, false, note);
            c.cfg = cfg;
            const std::string name = kernel_name(c);
            if (std::find(seen.begin(), seen.end(), name) != seen.end()) return;
            seen.push_back(name);
            cases.push_back(c);
        };
        add(ranked[0], "choice");
        add(ranked[1], "alt");
        // Fixed candidates so every shape compares the same families, cluster 1 vs 2.
        const int big[][3] = {{128, 128, 1}, {256, 128, 1}, {256, 128, 2}, {128, 192, 1},
                              {128, 160, 1}, {256, 96, 1},  {256, 64, 1}};
        const int small[][3] = {{64, 32, 1},  {64, 64, 1},  {64, 128, 1}, {128, 192, 1},
                                {128, 64, 1}, {64, 192, 1}, {128, 128, 1}};
        for (auto& f : (s[0] > 1024 ? big : small))
            add(make_sm90_fp8_gemm_config(false, f[0], f[1], f[2], s[0], s[1], s[2], g_num_sms), "fixed");
        // The same 128x128 (or 64x64) tiles with the other promotion schedule, for the A/B
        // (since v4 the model's configs overlap the promotion for block_n <= 128).
        Sm90Fp8GemmConfig ov = make_sm90_fp8_gemm_config(false, s[0] > 1024 ? 128 : 64, s[0] > 1024 ? 128 : 64, 1,
                                                          s[0], s[1], s[2], g_num_sms);
        ov.mma_overlap = !ov.mma_overlap;
        add(ov, ov.mma_overlap ? "overlap" : "no overlap");
        if (s[0] == 4096 && s[2] == 16384) {  // pipeline-depth sensitivity
            Sm90Fp8GemmConfig shallow = make_sm90_fp8_gemm_config(false, 128, 128, 1, s[0], s[1], s[2], g_num_sms);
            shallow.stages = 4;
            shallow.smem_bytes = sm90_fp8_smem_bytes(shallow.kind, 128, 128, 4);
            add(shallow, "4 stages");
        }
    }
    return cases;
}

// ------------------------------------------------------------------------------------------
// Device helpers: random data, dequantisation, reference, comparison
__device__ __forceinline__ float hash_uniform(uint64_t i, uint32_t seed) {
    uint64_t x = i * 0x9E3779B97F4A7C15ull + seed * 0xD1B54A32D192ED03ull;
    x ^= x >> 31; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 29; x *= 0x94D049BB133111EBull; x ^= x >> 32;
    return (x & 0xFFFFFF) * (1.0f / 16777216.0f);
}

// e4m3 values with log-uniform magnitudes in [2^-4, 2^4) and random signs.
__global__ void fill_fp8(__nv_fp8_e4m3* p, size_t count, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
        const float u = hash_uniform(i, seed), v = hash_uniform(i, seed ^ 0x55u);
        p[i] = __nv_fp8_e4m3((u < 0.5f ? -1.0f : 1.0f) * exp2f(v * 8.0f - 4.0f));
    }
}

// Positive scales in [2^-3, 2^3).
__global__ void fill_scale(float* p, size_t count, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        p[i] = exp2f(hash_uniform(i, seed) * 6.0f - 3.0f);
}

__global__ void fill_f32(float* p, size_t count, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        p[i] = hash_uniform(i, seed) * 200.0f - 100.0f;
}

// out[r][k] = x[r][k] * scale, scale = sf[k/128][r] (MN-major, pitch ld_sf) or
// sf[(r/128)][k/128] (block layout) when block_sf.
__global__ void dequant(const __nv_fp8_e4m3* x, const float* sf, float* out, int rows, int k, int ld_sf,
                        bool block_sf) {
    const size_t total = (size_t)rows * k;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const int r = (int)(i / k), kk = (int)(i % k);
        const float s = block_sf ? sf[(size_t)(r / 128) * (k / 128) + kk / 128] : sf[(size_t)(kk / 128) * ld_sf + r];
        out[i] = float(x[i]) * s;
    }
}

// ref[m][n] = sum_k a[m][k] b[n][k] (+ c[m][n]); 64x64 tiles, 256 threads, 4x4 per thread.
__global__ void ref_gemm(const float* a, const float* b, const float* c, float* ref, int m, int n, int k) {
    __shared__ float as[16][64 + 4], bs[16][64 + 4];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < k; k0 += 16) {
        for (int i = threadIdx.x; i < 64 * 16; i += 256) {
            const int r = i / 16, kk = i % 16;
            as[kk][r] = (m0 + r < m) ? a[(size_t)(m0 + r) * k + k0 + kk] : 0.0f;
            bs[kk][r] = (n0 + r < n) ? b[(size_t)(n0 + r) * k + k0 + kk] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < 16; ++kk) {
            float av[4], bv[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) { av[i] = as[kk][ty * 4 + i]; bv[i] = bs[kk][tx * 4 + i]; }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            const int r = m0 + ty * 4 + i, col = n0 + tx * 4 + j;
            if (r < m && col < n) ref[(size_t)r * n + col] = acc[i][j] + (c ? c[(size_t)r * n + col] : 0.0f);
        }
}

// Compares D (bf16 or fp32, pitch ld) with ref; sums for calc_diff in double, counts
// non-finite outputs (unwritten poison) and bytes outside [0, n) of each row or outside
// the tensor that differ from the 0xFF poison.
struct CheckSums { double xy, xx_yy; unsigned long long nonfinite, guard_bad; };

__global__ void compare(const uint8_t* buf, size_t guard, int elem, const float* ref, int m, int n, int ld,
                        size_t total_bytes, CheckSums* out) {
    double xy = 0, xxyy = 0;
    unsigned long long nonfinite = 0, bad = 0;
    const uint8_t* d = buf + guard;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)m * n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / n, col = i % n;
        const size_t off = (r * ld + col) * elem;
        float x;
        if (elem == 2) x = __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(d + off));
        else x = *reinterpret_cast<const float*>(d + off);
        if (!isfinite(x)) { ++nonfinite; continue; }
        const double y = ref[i];
        xy += (double)x * y;
        xxyy += (double)x * x + y * y;
    }
    // Guard bytes: front guard, row gaps, back guard.
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total_bytes; i += (size_t)gridDim.x * blockDim.x) {
        bool inside = false;
        if (i >= guard && i < guard + (size_t)m * ld * elem) {
            const size_t e = (i - guard) / elem;
            inside = (e % ld) < (size_t)n;
        }
        if (!inside && buf[i] != 0xFF) ++bad;
    }
    atomicAdd(&out->xy, xy);
    atomicAdd(&out->xx_yy, xxyy);
    atomicAdd(&out->nonfinite, nonfinite);
    atomicAdd(&out->guard_bad, bad);
}

// ------------------------------------------------------------------------------------------
// Launch, exactly as the launcher does
static CUtensorMap encode_map(const Sm90TensorMapSpec& s, void* base) {
    CUtensorMap map;
    const CUtensorMapDataType dt = s.dtype == Sm90TmaDtype::kU8    ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                   : s.dtype == Sm90TmaDtype::kF32 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                                                   : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    const CUtensorMapSwizzle sw = s.swizzle_bytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                  : s.swizzle_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                  : s.swizzle_bytes == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                          : CU_TENSOR_MAP_SWIZZLE_NONE;
    cuuint64_t dims[2] = {s.inner_elems, s.outer_elems};
    cuuint64_t strides[1] = {s.outer_stride_bytes};
    cuuint32_t box[2] = {s.box_inner, s.box_outer};
    cuuint32_t estr[2] = {1, 1};
    CUresult r = drv.tensorMapEncodeTiled(&map, dt, 2, base, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                          sw, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "cuTensorMapEncodeTiled(%s) failed: %d (dims %llu x %llu, box %u x %u)\n", s.operand, (int)r,
                (unsigned long long)s.inner_elems, (unsigned long long)s.outer_elems, s.box_inner, s.box_outer);
        exit(2);
    }
    return map;
}

struct Buffers {
    __nv_fp8_e4m3 *a = nullptr, *b = nullptr;
    float *sfa = nullptr, *sfb = nullptr, *c = nullptr;
    uint8_t* dbuf = nullptr;  // guard | D (m x ld) | guard
    size_t guard = 4096, d_bytes = 0, total = 0;
    uint8_t* d() const { return dbuf + guard; }
};

static std::map<std::string, CUfunction> g_funcs;
static std::map<std::string, int> g_max_clusters;

// The launcher's rule: a persistent grid must be fully co-resident, so with clusters it is
// clamped to cluster * cuOccupancyMaxActiveClusters (clusters live inside one GPC, so not
// every SM can always host a pair).
static int launch_grid(CUfunction fn, const Case& c) {
    if (c.cfg.cluster == 1) return c.cfg.grid_x;
    const std::string name = kernel_name(c);
    if (!g_max_clusters.count(name)) {
        CUlaunchConfig lc{};
        lc.gridDimX = c.cfg.grid_x; lc.gridDimY = lc.gridDimZ = 1;
        lc.blockDimX = c.cfg.num_threads; lc.blockDimY = lc.blockDimZ = 1;
        lc.sharedMemBytes = c.cfg.smem_bytes;
        CUlaunchAttribute attr[1];
        attr[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attr[0].value.clusterDim.x = c.cfg.cluster;
        attr[0].value.clusterDim.y = attr[0].value.clusterDim.z = 1;
        lc.attrs = attr; lc.numAttrs = 1;
        int n = 0;
        CHECK_CU(drv.occupancyMaxActiveClusters(&n, fn, &lc));
        g_max_clusters[name] = n;
        printf("    max active clusters of %d: %d (%s)\n", c.cfg.cluster, n, name.c_str());
    }
    return std::min(c.cfg.grid_x, c.cfg.cluster * g_max_clusters[name]);
}

static CUfunction get_function(const std::string& dir, const Case& c) {
    const std::string name = kernel_name(c);
    auto it = g_funcs.find(name);
    if (it != g_funcs.end()) return it->second;
    std::ifstream f(dir + "/" + name + ".cubin", std::ios::binary);
    if (!f) { fprintf(stderr, "missing cubin %s\n", name.c_str()); exit(2); }
    std::string img((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    CUmodule mod;
    CUfunction fn;
    CHECK_CU(drv.moduleLoadData(&mod, img.data()));
    CHECK_CU(drv.moduleGetFunction(&fn, mod, name.c_str()));
    CHECK_CU(drv.funcSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, c.cfg.smem_bytes));
    g_funcs[name] = fn;
    return fn;
}

struct Maps { CUtensorMap m[4]; };

static Maps build_maps(const Case& c, const Buffers& bf) {
    const int ld = c.n + c.ld_pad;
    const auto specs = sm90_fp8_gemm_tensor_maps(c.cfg, c.m, c.n, c.k, uint64_t(c.k), uint64_t(c.k), uint64_t(ld));
    void* bases[4] = {bf.a, bf.b, bf.sfa, c.fp32_out ? (void*)bf.sfb : (void*)bf.d()};
    Maps maps;
    for (int i = 0; i < 4; ++i) maps.m[i] = encode_map(specs[i], bases[i]);
    return maps;
}

static void launch(CUfunction fn, const Case& c, const Buffers& bf, Maps maps_in, cudaStream_t stream) {
    const int ld = c.n + c.ld_pad;
    CUtensorMap* maps = maps_in.m;
    uint32_t m = c.m, n = c.n, k = c.k, ldu = ld;
    const float* sfb = bf.sfb;
    const float* cptr = c.alias ? reinterpret_cast<const float*>(bf.d()) : bf.c;
    float* dptr = reinterpret_cast<float*>(bf.d());
    void* args2d[] = {&m, &n, &k, &sfb, &maps[0], &maps[1], &maps[2], &maps[3]};
    void* args1d[] = {&m, &n, &k, &cptr, &dptr, &ldu, &maps[0], &maps[1], &maps[2], &maps[3]};

    CUlaunchConfig lc{};
    lc.gridDimX = launch_grid(fn, c);
    lc.gridDimY = lc.gridDimZ = 1;
    lc.blockDimX = c.cfg.num_threads;
    lc.blockDimY = lc.blockDimZ = 1;
    lc.sharedMemBytes = c.cfg.smem_bytes;
    lc.hStream = stream;
    CUlaunchAttribute attr[1];
    attr[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr[0].value.clusterDim.x = c.cfg.cluster;
    attr[0].value.clusterDim.y = attr[0].value.clusterDim.z = 1;
    lc.attrs = attr;
    lc.numAttrs = 1;
    CHECK_CU(drv.launchKernelEx(&lc, fn, c.fp32_out ? args1d : args2d, nullptr));
}

// ------------------------------------------------------------------------------------------
struct Result {
    double diff = 1.0;
    bool finite = false, guards = false, bitwise = false;
    float us = 0;
    double tflops = 0;
};

static std::string cfg_str(const Sm90Fp8GemmConfig& c) {
    char s[96];
    snprintf(s, sizeof s, "%dx%d s%d c%d g%d", c.block_m, c.block_n, c.stages, c.cluster, c.grid_x);
    return s;
}

static Result run_case(const std::string& dir, const Case& c, uint32_t seed, bool time_it, uint8_t* flush) {
    Result res;
    const int m = c.m, n = c.n, k = c.k, ld = n + c.ld_pad, kb = k / 128;
    const int m_pad = (m + 3) / 4 * 4, n_pad = (n + 3) / 4 * 4;
    const int elem = c.fp32_out ? 4 : 2;
    Buffers bf;
    CHECK_CUDA(cudaMalloc(&bf.a, (size_t)m * k));
    CHECK_CUDA(cudaMalloc(&bf.b, (size_t)n * k));
    CHECK_CUDA(cudaMalloc(&bf.sfa, (size_t)kb * m_pad * 4));
    const size_t sfb_count = c.fp32_out ? (size_t)kb * n_pad : (size_t)((n + 127) / 128) * kb;
    CHECK_CUDA(cudaMalloc(&bf.sfb, sfb_count * 4));
    bf.d_bytes = (size_t)m * ld * elem;
    bf.total = bf.d_bytes + 2 * bf.guard;
    CHECK_CUDA(cudaMalloc(&bf.dbuf, bf.total));
    float *af, *bfl, *ref, *cinit = nullptr;
    CHECK_CUDA(cudaMalloc(&af, (size_t)m * k * 4));
    CHECK_CUDA(cudaMalloc(&bfl, (size_t)n * k * 4));
    CHECK_CUDA(cudaMalloc(&ref, (size_t)m * n * 4));
    fill_fp8<<<1024, 256>>>(bf.a, (size_t)m * k, seed * 4 + 1);
    fill_fp8<<<1024, 256>>>(bf.b, (size_t)n * k, seed * 4 + 2);
    fill_scale<<<256, 256>>>(bf.sfa, (size_t)kb * m_pad, seed * 4 + 3);
    fill_scale<<<256, 256>>>(bf.sfb, sfb_count, seed * 4 + 4);
    if (c.fp32_out) {
        // C values live in a packed m x n tensor for the reference; the kernel reads C with
        // pitch ld: bf.c (not aliased) or D itself (aliased), both filled from cinit.
        CHECK_CUDA(cudaMalloc(&cinit, (size_t)m * n * 4));
        fill_f32<<<256, 256>>>(cinit, (size_t)m * n, seed * 4 + 5);
        CHECK_CUDA(cudaMalloc(&bf.c, (size_t)m * ld * 4));
        CHECK_CUDA(cudaMemcpy2D(bf.c, (size_t)ld * 4, cinit, (size_t)n * 4, (size_t)n * 4, m, cudaMemcpyDeviceToDevice));
    }
    dequant<<<2048, 256>>>(bf.a, bf.sfa, af, m, k, m_pad, false);
    if (c.fp32_out) dequant<<<2048, 256>>>(bf.b, bf.sfb, bfl, n, k, n_pad, false);
    else dequant<<<2048, 256>>>(bf.b, bf.sfb, bfl, n, k, 0, true);
    ref_gemm<<<dim3((n + 63) / 64, (m + 63) / 64), 256>>>(af, bfl, cinit, ref, m, n, k);
    CHECK_CUDA(cudaGetLastError());

    auto prepare_d = [&]() {
        CHECK_CUDA(cudaMemset(bf.dbuf, 0xFF, bf.total));
        if (c.alias)
            CHECK_CUDA(cudaMemcpy2D(bf.d(), (size_t)ld * 4, cinit, (size_t)n * 4, (size_t)n * 4, m, cudaMemcpyDeviceToDevice));
    };
    CUfunction fn = get_function(dir, c);
    const Maps maps = build_maps(c, bf);
    std::vector<uint8_t> first(bf.total), second(bf.total);
    CheckSums* sums_dev;
    CheckSums sums_host;
    CheckSums* sums = &sums_host;
    CHECK_CUDA(cudaMalloc(&sums_dev, sizeof(CheckSums)));
    for (int rep = 0; rep < 2; ++rep) {
        prepare_d();
        launch(fn, c, bf, maps, 0);
        CHECK_CUDA(cudaGetLastError());
        CHECK_CUDA(cudaDeviceSynchronize());
        CHECK_CUDA(cudaMemcpy(rep == 0 ? first.data() : second.data(), bf.dbuf, bf.total, cudaMemcpyDeviceToHost));
    }
    CHECK_CUDA(cudaMemset(sums_dev, 0, sizeof(CheckSums)));
    compare<<<1024, 256>>>(bf.dbuf, bf.guard, elem, ref, m, n, ld, bf.total, sums_dev);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaMemcpy(sums, sums_dev, sizeof(CheckSums), cudaMemcpyDeviceToHost));
    res.diff = sums->xx_yy > 0 ? 1.0 - 2.0 * sums->xy / sums->xx_yy : 1.0;
    res.finite = sums->nonfinite == 0;
    res.guards = sums->guard_bad == 0;
    res.bitwise = first == second;
    if (!res.finite || !res.guards)
        printf("    nonfinite %llu, guard bytes changed %llu\n", sums->nonfinite, sums->guard_bad);

    if (time_it) {
        cudaEvent_t e0, e1;
        CHECK_CUDA(cudaEventCreate(&e0));
        CHECK_CUDA(cudaEventCreate(&e1));
        for (int i = 0; i < 3; ++i) launch(fn, c, bf, maps, 0);
        std::vector<float> ts;
        for (int i = 0; i < 40; ++i) {
            CHECK_CUDA(cudaMemsetAsync(flush, i & 0xFF, 256u << 20, 0));
            CHECK_CUDA(cudaEventRecord(e0, 0));
            launch(fn, c, bf, maps, 0);
            CHECK_CUDA(cudaEventRecord(e1, 0));
            CHECK_CUDA(cudaEventSynchronize(e1));
            float ms;
            CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
            ts.push_back(ms * 1000.0f);
        }
        CHECK_CUDA(cudaGetLastError());
        std::sort(ts.begin(), ts.end());
        res.us = ts[ts.size() / 2];
        res.tflops = 2.0 * m * n * (double)k / (res.us * 1e-6) / 1e12;
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
    }
    cudaFree(sums_dev);
    cudaFree(bf.a); cudaFree(bf.b); cudaFree(bf.sfa); cudaFree(bf.sfb); cudaFree(bf.dbuf);
    if (bf.c) cudaFree(bf.c);
    if (cinit) cudaFree(cinit);
    cudaFree(af); cudaFree(bfl); cudaFree(ref);
    return res;
}

int main(int argc, char** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s gen|run DIR [all|check|check1d2d|check1d1d|forced|bench]\n", argv[0]);
        return 1;
    }
    const std::string mode = argv[1], dir = argv[2], suite = argc > 3 ? argv[3] : "all";
    if (mode == "run") {
        int dev = 0;
        CHECK_CUDA(cudaSetDevice(dev));
        CHECK_CUDA(cudaDeviceGetAttribute(&g_num_sms, cudaDevAttrMultiProcessorCount, dev));
        drv.init();
    }
    const std::vector<Case> cases = build_cases();
    if (mode == "gen") {
        std::ofstream list(dir + "/kernels.txt");
        std::map<std::string, bool> seen;
        for (const auto& c : cases) {
            const std::string name = kernel_name(c);
            if (seen[name]) continue;
            seen[name] = true;
            std::ofstream(dir + "/" + name + ".cu") << sm90_fp8_kernel_source(kernel_spec(c));
            list << name << "\n";
        }
        printf("%zu cases, %zu kernels\n", cases.size(), seen.size());
        return 0;
    }
    uint8_t* flush;
    CHECK_CUDA(cudaMalloc(&flush, 256u << 20));
    int fails = 0, count = 0;
    uint32_t seed = 1;
    std::vector<std::string> table;
    for (const auto& c : cases) {
        // SUITE: all, one group name, or "check" (both check groups).
        if (suite != "all" && c.suite != suite && !(suite == "check" && c.suite.rfind("check", 0) == 0)) continue;
        const bool time_it = c.suite == "bench";
        Result r = run_case(dir, c, seed++, time_it, flush);
        const bool ok = r.diff < 1e-3 && r.finite && r.guards && r.bitwise;
        fails += !ok;
        ++count;
        char line[320];
        snprintf(line, sizeof line, "%-5s %s %5d %6d %6d ld+%d%s  %-22s diff %.2e %s%s%s%s", c.suite.c_str(),
                 c.fp32_out ? "1D1D" : "1D2D", c.m, c.n, c.k, c.ld_pad, c.alias ? " alias" : "      ",
                 cfg_str(c.cfg).c_str(), r.diff, ok ? "ok" : "FAIL", r.finite ? "" : " unwritten",
                 r.guards ? "" : " guard", r.bitwise ? "" : " nondet");
        std::string s = line;
        if (time_it) {
            snprintf(line, sizeof line, "  %8.1f us %7.1f TFLOP/s %s", r.us, r.tflops, c.note.c_str());
            s += line;
        }
        printf("%s\n", s.c_str());
        fflush(stdout);
        if (time_it || !ok) table.push_back(s);
    }
    printf("\n==== summary: %d cases, %d failed ====\n", count, fails);
    for (auto& s : table) printf("%s\n", s.c_str());
    return fails ? 1 : 0;
}
