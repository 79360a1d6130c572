// Launcher of the SM90 TF32 HyperConnection prenorm GEMM
// (cuda/deep_gemm/impls/sm90_tf32_hc_prenorm_gemm.cuh): its kernel spec, JIT source and
// tensor maps, its key, plan and launch, on the framework of launch/common.hpp.
//
// LAUNCH CONTRACT: grid {cfg.grid_x} = ceil(M / block_m) x num_splits x num_parts (not
// persistent), block {cfg.num_threads} = 288 (two math warpgroups, a producer warp), shared
// cfg.smem_bytes, cluster 1. Kernel arguments:
//   (uint32 m, uint32 num_k_blocks /*K / 64*/, uint32 num_splits, uint32 num_parts,
//    CUtensorMap a, CUtensorMap b, float* d, uint64 d_split_stride, uint32 ld_d,
//    float* sqr_sum, uint64 s_split_stride, float* workspace, int* counters)
//   Tensor maps (128B swizzle): A bf16 [M][K] box 64 x block_m; B fp32 [N][K] box 32 x N.
//   With num_parts > 1: a workspace of h::sm90_hc_workspace_bytes whose counters (its first
//   h::kSm90HcCounterBytes, the same region for every configuration) are zero, and stay zero
//   after the launch; it must not be shared by launches that may run at the same time (one
//   per stream).
#pragma once

#include <string>
#include <vector>

#include "../heuristics/sm90_hc_prenorm.hpp"
#include "common.hpp"

namespace deep_gemm::launch {

struct Sm90HcPrenormProblem {
  int m = 0, n = 0, k = 0, num_splits = 1;
  int device = 0;
  const void* a = nullptr;
  const void* b = nullptr;
  float* d = nullptr;
  float* sqr_sum = nullptr;
  uint64_t lda_bytes = 0, ldb_bytes = 0;  // row pitches of A and B
  uint64_t ld_d = 0;                      // D's row pitch (elements)
  uint64_t d_split_stride = 0, s_split_stride = 0;  // elements between splits (0: one split)
};

// What one compiled kernel is.
struct Sm90HcPrenormKernelSpec {
  uint32_t n = 24, block_m = 64, stages = 8;
  int smem_bytes = 0;
};

inline std::string sm90_hc_prenorm_kernel_name(const Sm90HcPrenormKernelSpec& s) {
  const auto u = [](uint32_t v) { return std::to_string(v); };
  return "sm90_tf32_hc_prenorm_gemm_n" + u(s.n) + "_b" + u(s.block_m) + "_s" + u(s.stages);
}

inline std::string sm90_hc_prenorm_kernel_source(const Sm90HcPrenormKernelSpec& s) {
  TemplateArgs t;
  t.always(s.n).always(s.block_m).always(s.stages);
  std::string code = smem_bytes_define(s.smem_bytes);
  code += "#include <deep_gemm/impls/sm90_tf32_hc_prenorm_gemm.cuh>\n\n";
  code += "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(h::kSm90HcThreads) + ", 1)\n";
  code += sm90_hc_prenorm_kernel_name(s) + "(uint32_t m, uint32_t num_k_blocks, uint32_t num_splits,\n"
          "         uint32_t num_parts, const __grid_constant__ CUtensorMap tmap_a,\n"
          "         const __grid_constant__ CUtensorMap tmap_b, float* d, uint64_t d_split_stride, uint32_t ld_d,\n"
          "         float* sqr_sum, uint64_t s_split_stride, float* workspace, int* counters) {\n";
  code += "    deep_gemm::sm90_tf32_hc_prenorm_gemm_impl<" + t.str() +
          ">(\n        m, num_k_blocks, num_splits, num_parts, &tmap_a, &tmap_b, d, d_split_stride, ld_d, sqr_sum, "
          "s_split_stride,\n        workspace, counters);\n}\n";
  return code;
}

// The tensor maps of a launch, in argument order (a, b).
inline std::vector<Sm90TensorMapSpec> sm90_hc_prenorm_tensor_maps(const h::Sm90HcPrenormConfig& c,
                                                                  const Sm90HcPrenormProblem& p) {
  const uint64_t k = static_cast<uint64_t>(p.k);
  return {{"a", Sm90TmaDtype::kBF16, k, static_cast<uint64_t>(p.m), p.lda_bytes, 64, static_cast<uint32_t>(c.block_m), 128},
          {"b", Sm90TmaDtype::kF32, k, static_cast<uint64_t>(p.n), p.ldb_bytes, 32, static_cast<uint32_t>(p.n), 128}};
}

namespace detail {

struct HcPrenormConfigKey {
  int m, n, k, num_splits, num_sms, device;
  bool operator==(const HcPrenormConfigKey&) const = default;
  size_t hash() const { return hash_fields({m, n, k, num_splits, num_sms, device}); }
};

// DG_DEV_HC_BLOCK_M (64 or 128) and DG_DEV_HC_PARTS (1 to 64) force the choice (A/B runs).
inline int hc_block_m_knob() {
  static const int v = env_int_knob("DG_DEV_HC_BLOCK_M", [](int x) { return x == 0 || x == 64 || x == 128; },
                                    "64 or 128");
  return v;
}
inline int hc_parts_knob() {
  static const int v = env_int_knob("DG_DEV_HC_PARTS", [](int x) { return x >= 0 && x <= 64; }, "1 to 64");
  return v;
}

}  // namespace detail

inline Plan<h::Sm90HcPrenormConfig> plan_sm90_hc_prenorm(const detail::HcPrenormConfigKey& key, int max_smem) {
  const auto cfg = h::choose_sm90_hc_prenorm_config(key.m, key.n, key.k, key.num_splits, key.num_sms, max_smem,
                                                    detail::hc_block_m_knob(), detail::hc_parts_knob());
  Sm90HcPrenormKernelSpec s;
  s.n = static_cast<uint32_t>(key.n);
  s.block_m = static_cast<uint32_t>(cfg.block_m);
  s.stages = static_cast<uint32_t>(cfg.stages);
  s.smem_bytes = cfg.smem_bytes;
  const std::string name = sm90_hc_prenorm_kernel_name(s);
  return {cfg, JitContext::get().source(name, sm90_hc_prenorm_kernel_source(s), name)};
}

class Sm90HcPrenormLauncher {
 public:
  static Sm90HcPrenormLauncher& get() {
    static Sm90HcPrenormLauncher instance;
    return instance;
  }

  // workspace(bytes) -> a device buffer of at least `bytes` for this launch's stream, its
  // first bytes (the counters) zero: called only when the chosen configuration splits K.
  template <class WorkspaceFn>
  void run(const Sm90HcPrenormProblem& p, const char* op, WorkspaceFn&& workspace) {
    const auto& rt = DeviceRuntime::get();
    const detail::HcPrenormConfigKey key{p.m, p.n, p.k, p.num_splits, rt.num_sms(p.device), p.device};
    const auto& e = cache_.get(key, p.device, op, plan_sm90_hc_prenorm, [&](const h::Sm90HcPrenormConfig& c) {
      return deep_jit::detail::cat(op, " m=", p.m, " n=", p.n, " k=", p.k, " splits=", p.num_splits, " -> block_m ",
                                   c.block_m, ", ", c.num_parts, " K parts, ", c.stages, " stages, ", c.k_blocks_per_cta,
                                   " K blocks per CTA, grid ", c.grid_x, ", smem ", c.smem_bytes, " B");
    });
    const auto specs = sm90_hc_prenorm_tensor_maps(e.cfg, p);
    const CUtensorMap ma = encode_tensor_map(specs[0], p.a);
    const CUtensorMap mb = encode_tensor_map(specs[1], p.b);
    const auto lc = persistent_launch(e.cfg, rt.pdl());
    const auto m = static_cast<uint32_t>(p.m), kb = static_cast<uint32_t>(p.k / h::kSm90HcBlockK);
    const auto splits = static_cast<uint32_t>(p.num_splits), ld_d = static_cast<uint32_t>(p.ld_d);
    const auto parts = static_cast<uint32_t>(e.cfg.num_parts);
    const long ws_bytes = h::sm90_hc_workspace_bytes(e.cfg, p.m, p.num_splits);
    int* counters = ws_bytes > 0 ? static_cast<int*>(workspace(static_cast<size_t>(ws_bytes))) : nullptr;
    float* partials =
        counters ? reinterpret_cast<float*>(reinterpret_cast<char*>(counters) + h::kSm90HcCounterBytes) : nullptr;
    deep_jit::launch(*e.kernel, lc, m, kb, splits, parts, ma, mb, p.d, p.d_split_stride, ld_d, p.sqr_sum,
                     p.s_split_stride, partials, counters);
  }

 private:
  KernelCache<detail::HcPrenormConfigKey, h::Sm90HcPrenormConfig> cache_;
};

}  // namespace deep_gemm::launch
