// Launchers of the k-grouped FP8 GEMM (MoE weight gradients):
//   Sm90KGroupedLauncher: the GEMM (cuda/deep_gemm/impls/sm90_fp8_k_grouped.cuh). Groups go
//     in launches of at most kSm90KGroupedMaxGroups; each launch carries its groups' A/B
//     tensor maps and K sizes in one by-value kernel parameter (KGroupedArgs), built here
//     from ks on the host. Nothing reads ks_tensor: the kernel gets everything by value, so
//     a captured CUDA graph replays with the ks of its capture.
//   KGroupedTransposeLauncher: the `tn` form's layout kernel (impls/k_grouped_transpose.cuh),
//     MN-major [sum_k, mn] into the `nt` form's per-group K-major layout.
#pragma once

#include <cstddef>
#include <cstdio>
#include <vector>

#include "../heuristics/sm90_fp8_k_grouped.hpp"
#include "common.hpp"
#include "sm90_fp8_source.hpp"

namespace deep_gemm::launch {

// Host mirror of deep_gemm::KGroupedArgs<kSm90KGroupedMaxGroups> (same members, same
// offsets; the device side asserts the same numbers).
struct Sm90KGroupedArgs {
  CUtensorMap a[kSm90KGroupedMaxGroups];
  CUtensorMap b[kSm90KGroupedMaxGroups];
  uint32_t k_blocks[kSm90KGroupedMaxGroups];
  uint32_t kb_offset[kSm90KGroupedMaxGroups];
  uint32_t num_groups;
};
static_assert(kSm90KGroupedMaxGroups == 32, "update the offsets below and in sm90_fp8_k_grouped.cuh");
static_assert(sizeof(CUtensorMap) == 128, "CUtensorMap is 128 bytes");
static_assert(offsetof(Sm90KGroupedArgs, b) == 4096 && offsetof(Sm90KGroupedArgs, k_blocks) == 8192 &&
                  offsetof(Sm90KGroupedArgs, kb_offset) == 8320 && offsetof(Sm90KGroupedArgs, num_groups) == 8448,
              "Sm90KGroupedArgs must mirror deep_gemm::KGroupedArgs<32>");

struct Sm90KGroupedProblem {
  int m = 0, n = 0;
  int compiled_m = 0, compiled_n = 0;  // 0 = runtime argument
  int device = 0;
  const std::vector<int64_t>* ks = nullptr;  // per-group K, multiples of 128 (may be 0)
  const uint8_t* a = nullptr;  // flat nt layout: group g's [m, k_g] K-major at element m * o_g
  const uint8_t* b = nullptr;  // likewise [n, k_g] at n * o_g
  const float* sfa = nullptr;  // [sum_k/128, align(m, 4)]
  const float* sfb = nullptr;  // [sum_k/128, align(n, 4)]
  const float* c = nullptr;    // [G, m, n] fp32 (may equal d) or null
  float* d = nullptr;          // [G, m, n] fp32
};

namespace detail {

struct KGroupedKey {
  int m, n, k_bucket, groups, compiled_m, compiled_n, num_sms, mult_m, mult_n, device;
  bool operator==(const KGroupedKey&) const = default;
  size_t hash() const {
    return hash_fields({m, n, k_bucket, groups, compiled_m, compiled_n, num_sms, mult_m, mult_n, device});
  }
};

inline h::Sm90Fp8GemmConfig choose_k_grouped_config(const KGroupedKey& key, int max_smem) {
  for (const auto& c :
       h::rank_sm90_fp8_k_grouped_configs(key.m, key.n, key.k_bucket, key.groups, key.num_sms, max_smem)) {
    if (c.block_m % key.mult_m == 0 && c.block_n % key.mult_n == 0) return c;
  }
  throw std::runtime_error(deep_jit::detail::cat(
      "deep_gemm: no SM90 k-grouped FP8 GEMM configuration has block sizes that are multiples of (", key.mult_m, ", ",
      key.mult_n, ") as set_block_size_multiple_of asks"));
}

}  // namespace detail

// The plan of one launch (used by the launcher and by warmup, no GPU).
inline Plan<h::Sm90Fp8GemmConfig> plan_sm90_fp8_k_grouped(const detail::KGroupedKey& key, int max_smem) {
  const auto cfg = detail::choose_k_grouped_config(key, max_smem);
  const auto kernel = sm90_fp8_k_grouped_kernel(cfg, key.compiled_m, key.compiled_n);
  const std::string name = sm90_fp8_kernel_name(kernel);
  return {cfg, JitContext::get().source(name, sm90_fp8_kernel_source(kernel), name)};
}

class Sm90KGroupedLauncher {
 public:
  static Sm90KGroupedLauncher& get() {
    static Sm90KGroupedLauncher instance;
    return instance;
  }

  void run(const Sm90KGroupedProblem& p, const char* op) {
    const auto& ks = *p.ks;
    const int num_groups = static_cast<int>(ks.size());
    const auto& rt = DeviceRuntime::get();
    const auto [mult_m, mult_n] = rt.block_size_multiple_of();
    const int num_sms = rt.num_sms(p.device);
    int64_t sum_k = 0;
    for (int64_t k : ks) sum_k += k;
    const uint64_t sum_kb = static_cast<uint64_t>(sum_k / 128);
    const size_t group_elems = static_cast<size_t>(p.m) * static_cast<size_t>(p.n);

    int64_t offset = 0;  // o_g of the launch's first group
    for (int g0 = 0; g0 < num_groups; g0 += kSm90KGroupedMaxGroups) {
      const int g1 = std::min(num_groups, g0 + kSm90KGroupedMaxGroups);
      int64_t chunk_k = 0;
      for (int g = g0; g < g1; ++g) chunk_k += ks[g];
      const detail::KGroupedKey key{p.m, p.n, h::sm90_k_grouped_k_bucket(chunk_k, g1 - g0), g1 - g0,
                                    p.compiled_m, p.compiled_n, num_sms, mult_m, mult_n, p.device};
      const auto& e = cache_.get(key, p.device, op, plan_sm90_fp8_k_grouped, [&](const h::Sm90Fp8GemmConfig& c) {
        return deep_jit::detail::cat(op, " (k-grouped 1D1D) m=", key.m, " n=", key.n, " groups=", key.groups, " k~",
                                     key.k_bucket, " -> block ", c.block_m, "x", c.block_n, ", ", c.stages,
                                     " stages, grid ", c.grid_x, ", smem ", c.smem_bytes, " B");
      });

      Sm90KGroupedArgs args{};
      int64_t o = offset;
      for (int g = g0; g < g1; ++g) {
        const int j = g - g0;
        const auto k_g = static_cast<uint64_t>(ks[g]);
        args.k_blocks[j] = static_cast<uint32_t>(k_g / 128);
        args.kb_offset[j] = static_cast<uint32_t>(o / 128);
        if (k_g > 0) {
          const auto specs = sm90_fp8_k_grouped_group_maps(e.cfg, p.m, p.n, k_g);
          args.a[j] = encode_tensor_map(specs[0], p.a + static_cast<size_t>(p.m) * static_cast<size_t>(o));
          args.b[j] = encode_tensor_map(specs[1], p.b + static_cast<size_t>(p.n) * static_cast<size_t>(o));
        }
        o += ks[g];
      }
      args.num_groups = static_cast<uint32_t>(g1 - g0);
      // An all-empty call has no scale rows: point its (never loaded) scale maps at d.
      const auto sf_specs = sm90_fp8_k_grouped_sf_maps(e.cfg, p.m, p.n, sum_kb);
      const CUtensorMap tmap_sfa = encode_tensor_map(sf_specs[0], sum_kb > 0 ? static_cast<const void*>(p.sfa) : p.d);
      const CUtensorMap tmap_sfb = encode_tensor_map(sf_specs[1], sum_kb > 0 ? static_cast<const void*>(p.sfb) : p.d);
      const auto lc = persistent_launch(e.cfg, rt.pdl());
      const auto m = static_cast<uint32_t>(p.m), n = static_cast<uint32_t>(p.n);
      const float* c = p.c != nullptr ? p.c + static_cast<size_t>(g0) * group_elems : nullptr;
      float* d = p.d + static_cast<size_t>(g0) * group_elems;
      deep_jit::launch(*e.kernel, lc, m, n, c, d, tmap_sfa, tmap_sfb, args);
      offset = o;
    }
  }

 private:
  KernelCache<detail::KGroupedKey, h::Sm90Fp8GemmConfig> cache_;
};

// ---- the tn form's layout kernel --------------------------------------------------------

// Groups per transpose launch (a small by-value table, well under the 4 KB classic limit).
constexpr int kKGroupedTransposeMaxGroups = 128;

// Host mirror of deep_gemm::KGroupedTransposeArgs<kKGroupedTransposeMaxGroups>.
struct KGroupedTransposeArgs {
  uint32_t kb_start[kKGroupedTransposeMaxGroups + 1];
  uint32_t num_groups;
};

struct KGroupedTransposeProblem {
  const uint8_t* in = nullptr;  // [sum_k, mn] row-major e4m3
  uint8_t* out = nullptr;       // flat [sum_k * mn]: group g's [mn, k_g] at mn * o_g
  int64_t mn = 0;
  const std::vector<int64_t>* ks = nullptr;
  int device = 0;
};

class KGroupedTransposeLauncher {
 public:
  static KGroupedTransposeLauncher& get() {
    static KGroupedTransposeLauncher instance;
    return instance;
  }

  void run(const KGroupedTransposeProblem& p) {
    const auto& ks = *p.ks;
    const int num_groups = static_cast<int>(ks.size());
    const auto& k = kernel(p.device);
    int64_t offset = 0;
    for (int g0 = 0; g0 < num_groups; g0 += kKGroupedTransposeMaxGroups) {
      const int g1 = std::min(num_groups, g0 + kKGroupedTransposeMaxGroups);
      KGroupedTransposeArgs args{};
      uint32_t kb = 0;
      for (int g = g0; g < g1; ++g) {
        args.kb_start[g - g0] = kb;
        kb += static_cast<uint32_t>(ks[g] / 128);
      }
      args.kb_start[g1 - g0] = kb;
      args.num_groups = static_cast<uint32_t>(g1 - g0);
      if (kb > 0) {
        deep_jit::LaunchConfig lc;
        lc.grid[0] = kb;
        lc.grid[1] = static_cast<unsigned>((p.mn + 127) / 128);
        lc.block[0] = 256;
        const uint8_t* in = p.in + static_cast<size_t>(offset) * static_cast<size_t>(p.mn);
        uint8_t* out = p.out + static_cast<size_t>(offset) * static_cast<size_t>(p.mn);
        const auto mn = static_cast<uint32_t>(p.mn);
        deep_jit::launch(k, lc, in, out, mn, args);
      }
      offset += static_cast<int64_t>(kb) * 128;
    }
  }

  // The kernel source (for warmup as well).
  static deep_jit::KernelSource source() {
    const std::string cap = std::to_string(kKGroupedTransposeMaxGroups);
    const std::string name = "sm90_fp8_k_grouped_transpose_x" + cap;  // also the entry symbol
    return JitContext::get().source(
        name,
        "#include <deep_gemm/impls/k_grouped_transpose.cuh>\n\n"
        "extern \"C\" __global__ void __launch_bounds__(256)\n" + name +
            "(const uint8_t* in, uint8_t* out, uint32_t mn,\n"
            "         const __grid_constant__ deep_gemm::KGroupedTransposeArgs<" + cap + "> args) {\n"
            "    deep_gemm::k_grouped_transpose_impl<" + cap + ">(in, out, mn, args);\n}\n",
        name);
  }

 private:
  const deep_jit::Kernel& kernel(int device) {
    return kernel_.get(device, "k_grouped_fp8_gemm_tn_contiguous", &KGroupedTransposeLauncher::source);
  }

  PerDeviceKernel kernel_;
};

}  // namespace deep_gemm::launch
