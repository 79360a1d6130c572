// Launcher of the SM90 FP8 GEMM kernels (1D2D and 1D1D): its key, its plan (the
// heuristics' configuration and its kernel, launch/sm90_fp8_source.hpp) and its argument
// packing, on the shared framework of launch/common.hpp. A repeated call is a hash-map
// lookup plus tensor-map encoding: no source generation, hashing or file access on the hot
// path.
#pragma once

#include <string_view>

#include "sm90_fp8_1d2d.hpp"

namespace deep_gemm::launch {

struct Sm90Fp8Problem {
  bool fp32_out = false;  // 1D1D
  int m = 0, n = 0, k = 0;
  int compiled_m = 0, compiled_n = 0, compiled_k = 0;  // 0 = runtime argument
  int device = 0;
  // Operands (device pointers) and pitches.
  const void* a = nullptr;
  const void* b = nullptr;
  const void* sfa = nullptr;
  const void* sfb = nullptr;
  const void* c = nullptr;  // 1D1D accumulation source (may equal d) or null
  void* d = nullptr;
  uint64_t lda_bytes = 0, ldb_bytes = 0, ld_d = 0;  // ld_d in elements
  // The op just launched its own scale conversion on this stream: launch with programmatic
  // dependent launch even when set_pdl is off, so this kernel's setup overlaps that small
  // kernel (it waits for the previous grid's writes before any global read, see the impls).
  bool after_own_kernel = false;
  // Per-token SFA that is not in the TMA layout, given as is (fp32 [m, k/128], strides in
  // elements): the launcher reads it from global memory where the configuration allows
  // (h::sm90_fp8_sfa_from_global_fits); else the op converts it first (see prepare()).
  bool sfa_from_global = false;
  uint32_t sfa_stride_m = 0, sfa_stride_k = 0;
  // 1D1D (fp32_out) with a bf16 D: D = A B^T, no C (upstream's wgrad form without accumulation).
  bool bf16_1d1d = false;
  // fp8_gemm_nt_skip_head_mid (1D2D): heads of head_left + head_right product columns, each
  // written to D with head_mid columns skipped in its middle; d_cols is D's width.
  int head_left = 0, head_mid = 0, head_right = 0;
  uint64_t d_cols = 0;
};

namespace detail {

// Everything that changes the chosen configuration or the compiled kernel.
struct ConfigKey {
  bool fp32_out;
  int m, n, k, compiled_m, compiled_n, compiled_k, num_sms, mult_m, mult_n, device;
  bool sfa_from_global = false;  // asked for; the entry's config says whether it was taken
  bool bf16_1d1d = false;        // fp32_out (1D1D) with a bf16 D
  int head_left = 0, head_mid = 0, head_right = 0;  // skip-head-mid (1D2D)
  bool operator==(const ConfigKey&) const = default;
  size_t hash() const {
    return hash_fields({m, n, k, compiled_m, compiled_n, compiled_k, num_sms, mult_m, mult_n, device, int(fp32_out),
                        int(sfa_from_global), int(bf16_1d1d), head_left, head_mid, head_right});
  }
};

// DG_DEV_SM90_FP8_CLUSTER=1|2 forces the cluster size (2 = TMA multicast of A in
// CTA pairs); unset, the heuristics choose, and they leave multicast out since it
// measured slower than cluster 1 so far (docs/design-notes.md). For tuning and for
// testing the cluster path.
inline int forced_cluster() {
  static const int value =
      env_int_knob("DG_DEV_SM90_FP8_CLUSTER", [](int v) { return v == 1 || v == 2; }, "1 or 2");
  return value;
}

// DG_DEV_SM90_FP8_SFA_FROM_GLOBAL=0 makes the dense 1D2D GEMMs always convert per-token scales
// into the TMA layout (a layout kernel per call) instead of reading them as given at small
// M (h::kSm90Fp8SfaFromGlobalMaxM); unset or 1, they read them where that fits. For A/B runs.
inline bool sfa_from_global_allowed() {
  static const bool value = env_bool_knob("DG_DEV_SM90_FP8_SFA_FROM_GLOBAL", true);
  return value;
}

// DG_DEV_SM90_FP8_EVICT_FIRST_B=0|1 overrides whether a dense 1D2D GEMM loads B under L2's
// evict-first policy (h::sm90_fp8_b_read_once); unset, the rule decides. For A/B runs.
inline int forced_evict_first_b() {
  static const int value = env_override_knob("DG_DEV_SM90_FP8_EVICT_FIRST_B");
  return value;
}

inline h::Sm90Fp8GemmConfig choose_config(const ConfigKey& key, int max_smem) {
  const int cluster = forced_cluster();
  for (const auto& c : h::rank_sm90_fp8_gemm_configs(key.m, key.n, key.k, key.num_sms, key.fp32_out, max_smem,
                                                     cluster == 2)) {
    if (cluster != 0 && c.cluster != cluster) continue;
    if (!block_m_allowed(c)) continue;
    // Skip-head-mid remaps the D columns per staging atom (swizzle_d / 2 columns): an atom
    // must not straddle a head's seams.
    if (key.head_left > 0 && (key.head_left % (c.swizzle_d / 2) != 0 || key.head_right % (c.swizzle_d / 2) != 0))
      continue;
    if (c.block_m % key.mult_m == 0 && c.block_n % key.mult_n == 0) {
      auto chosen = with_tuning_knobs(c);
      chosen.sfa_from_global =
          key.sfa_from_global && sfa_from_global_allowed() && h::sm90_fp8_sfa_from_global_fits(chosen, key.m);
      chosen.evict_first_b = knob_or_rule(forced_evict_first_b(), chosen.kind == h::Sm90Fp8Kind::k1D2D,
                                          h::sm90_fp8_b_read_once(chosen, key.m, key.n, key.k));
      return chosen;
    }
  }
  throw std::runtime_error(deep_jit::detail::cat("deep_gemm: no SM90 FP8 GEMM configuration has block sizes that are multiples of (",
                                                 key.mult_m, ", ", key.mult_n, ") as set_block_size_multiple_of asks"));
}

// Calls f with the first `count` tensor maps as separate arguments (3 to 6: a launch passes
// each by value; see sm90_fp8_gemm_tensor_maps for which a config has).
template <typename F>
void with_maps(const CUtensorMap* ms, size_t count, F&& f) {
  switch (count) {
    case 3: return f(ms[0], ms[1], ms[2]);
    case 4: return f(ms[0], ms[1], ms[2], ms[3]);
    case 5: return f(ms[0], ms[1], ms[2], ms[3], ms[4]);
    case 6: return f(ms[0], ms[1], ms[2], ms[3], ms[4], ms[5]);
    default: throw std::logic_error("deep_gemm: an SM90 FP8 GEMM launch takes 3 to 6 tensor maps");
  }
}

inline const void* operand_base(const Sm90Fp8Problem& p, const char* name) {
  const std::string_view n(name);
  if (n == "a") return p.a;
  if (n == "b") return p.b;
  if (n == "sfa") return p.sfa;
  if (n == "sfb") return p.sfb;
  return p.d;
}

}  // namespace detail

// The plan for a problem, as the launcher would make it on a device with `key.num_sms`
// SMs and `max_smem` bytes of opt-in shared memory. Used by the launcher and by `python -m
// deep_gemm.warmup` (which needs no GPU).
inline Plan<h::Sm90Fp8GemmConfig> plan_sm90_fp8_gemm(const detail::ConfigKey& key, int max_smem) {
  const auto cfg = detail::choose_config(key, max_smem);
  auto kernel = sm90_fp8_gemm_kernel(cfg, key.compiled_m, key.compiled_n, key.compiled_k);
  kernel.bf16_out = key.bf16_1d1d;
  kernel.head_left = static_cast<uint32_t>(key.head_left);
  kernel.head_mid = static_cast<uint32_t>(key.head_mid);
  kernel.head_right = static_cast<uint32_t>(key.head_right);
  const std::string name = sm90_fp8_kernel_name(kernel);
  return {cfg, JitContext::get().source(name, sm90_fp8_kernel_source(kernel), name)};
}

class Sm90Fp8GemmLauncher {
 public:
  static Sm90Fp8GemmLauncher& get() {
    static Sm90Fp8GemmLauncher instance;
    return instance;
  }

  using Entry = KernelCache<detail::ConfigKey, h::Sm90Fp8GemmConfig>::Entry;

  // The configuration and kernel for `p` (compiled or loaded on first use). With
  // p.sfa_from_global, entry.cfg.sfa_from_global says whether the kernel reads the scales
  // as given; where it is false the caller must pass converted scales to launch().
  const Entry& prepare(const Sm90Fp8Problem& p) {
    const auto& rt = DeviceRuntime::get();
    const auto [mult_m, mult_n] = rt.block_size_multiple_of();
    const detail::ConfigKey key{p.fp32_out,  p.m,    p.n,    p.k,      p.compiled_m,       p.compiled_n,
                                p.compiled_k, rt.num_sms(p.device), mult_m, mult_n, p.device, p.sfa_from_global,
                                p.bf16_1d1d, p.head_left, p.head_mid, p.head_right};
    return cache_.get(key, p.device, "fp8_gemm_nt", plan_sm90_fp8_gemm, [&](const h::Sm90Fp8GemmConfig& c) {
      return deep_jit::detail::cat(p.fp32_out ? "fp8_gemm 1D1D" : "fp8_gemm 1D2D", " m=", p.m, " n=", p.n, " k=", p.k,
                                   " -> block ", c.block_m, "x", c.block_n, ", ", c.stages, " stages, cluster ", c.cluster,
                                   ", grid ", c.grid_x, ", smem ", c.smem_bytes, " B",
                                   c.mma_overlap ? ", overlapped promotion" : "",
                                   c.block_m == 256 ? ", two slabs per warpgroup" : "",
                                   c.sfa_from_global ? ", per-token scales read as given" : "",
                                   c.fit_m ? ", boxes of the M rows" : c.tail_m ? ", tail boxes" : "");
    });
  }

  void run(const Sm90Fp8Problem& p) { launch(prepare(p), p); }

  static void launch(const Entry& e, const Sm90Fp8Problem& p) {
    const auto specs = sm90_fp8_gemm_tensor_maps(e.cfg, p.m, p.n, p.k, p.lda_bytes, p.ldb_bytes, p.ld_d, p.d_cols);
    CUtensorMap maps[6];
    for (size_t i = 0; i < specs.size(); ++i) maps[i] = encode_tensor_map(specs[i], detail::operand_base(p, specs[i].operand));
    const auto lc = persistent_launch(e.cfg, DeviceRuntime::get().pdl() || p.after_own_kernel);
    const auto m = static_cast<uint32_t>(p.m), n = static_cast<uint32_t>(p.n), k = static_cast<uint32_t>(p.k);
    // The maps go last, as many as the config has (cfg.tail_m adds the tail ones).
    const size_t num_maps = specs.size();
    if (p.fp32_out) {
      const auto* c = static_cast<const float*>(p.c);
      void* d = p.d;  // float or (bf16_1d1d) __nv_bfloat16
      const auto ld_d = static_cast<uint32_t>(p.ld_d);
      detail::with_maps(maps, num_maps, [&](const auto&... ms) { deep_jit::launch(*e.kernel, lc, m, n, k, c, d, ld_d, ms...); });
    } else if (e.cfg.sfa_from_global) {
      const auto* sfb = static_cast<const float*>(p.sfb);
      const auto* sfa = static_cast<const float*>(p.sfa);
      detail::with_maps(maps, num_maps, [&](const auto&... ms) {
        detail::launch_1d2d(*e.kernel, lc, m, n, k, sfb, sfa, p.sfa_stride_m, p.sfa_stride_k, ms...);
      });
    } else {
      const auto* sfb = static_cast<const float*>(p.sfb);
      detail::with_maps(maps, num_maps, [&](const auto&... ms) { detail::launch_1d2d(*e.kernel, lc, m, n, k, sfb, ms...); });
    }
  }

 private:
  KernelCache<detail::ConfigKey, h::Sm90Fp8GemmConfig> cache_;
};

}  // namespace deep_gemm::launch
