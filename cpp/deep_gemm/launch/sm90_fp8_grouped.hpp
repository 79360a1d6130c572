// Launcher of the SM90 m-grouped FP8 GEMMs (MoE: contiguous, psum, masked): the 1D2D
// kernel instantiated with an m-grouped scheduler, on the framework of launch/common.hpp
// (its key, plan and argument packing). It shares the 1D2D kernel's tuning knobs and launch
// with the dense launcher (launch/sm90_fp8_1d2d.hpp). Nothing here reads grouped_layout /
// masked_m: the kernel does, on the GPU.
#pragma once

#include <string_view>

#include "sm90_fp8_1d2d.hpp"

namespace deep_gemm::launch {

struct Sm90Fp8GroupedProblem {
  int gemm_type = 1;              // heuristics::Sm90GroupedType
  int m = 0, n = 0, k = 0;        // m: M_sum (contiguous, psum) or rows per group (masked)
  int num_groups = 1;
  int m_for_config = 0;           // rows per group the heuristic assumes (masked: expected_m)
  int groups_for_config = 1;
  int align_m = 128;              // contiguous: group start alignment
  int compiled_m = 0, compiled_n = 0, compiled_k = 0;
  int device = 0;
  const void* a = nullptr;
  const void* b = nullptr;
  const void* sfa = nullptr;  // MN-major, TMA-aligned ([kb, pad] or [G, kb, pad])
  const void* sfb = nullptr;  // contiguous [G, ceil(N/128), K/128]
  const void* layout = nullptr;
  void* d = nullptr;
  uint64_t lda_bytes = 0, ldb_bytes = 0, ld_d = 0;
  // masked: from one group's A (bytes) and D (elements) to the next (any multiple of 16 bytes)
  uint64_t a_group_bytes = 0, d_group_elems = 0;
  bool after_own_kernel = false;  // as Sm90Fp8Problem::after_own_kernel
  int* tile_counter = nullptr;    // with dynamic_tiles_enabled(): an int32 that is 0 at launch
};

// Whether the m-grouped GEMMs claim their tiles at run time from a per-call counter
// instead of walking them with the static stride (tile_scheduler.cuh). On by default:
// measured on the H200 (2026-12-01, docs/design-notes.md) masked 6 x ~1024 2.6-4.8%
// faster over three token distributions, masked 32 x ~192 0.3-1.1%, contiguous 4 x ~8192
// 2.2-2.8% (index) and 1.8% (psum), 8 x ~4096 unchanged (index) and 1.1% (psum).
// DG_DEV_SM90_FP8_DYNAMIC_TILES=0 restores the static stride (A/B). Read once per process.
inline bool dynamic_tiles_enabled() {
  static const bool value = detail::env_bool_knob("DG_DEV_SM90_FP8_DYNAMIC_TILES", true);
  return value;
}

namespace detail {

struct GroupedKey {
  int gemm_type, m, groups, n, k, compiled_m, compiled_n, compiled_k, num_sms, mult_m, mult_n, align_m, device;
  bool operator==(const GroupedKey&) const = default;
  size_t hash() const {
    return hash_fields({gemm_type, m, groups, n, k, compiled_m, compiled_n, compiled_k, num_sms, mult_m, mult_n, align_m,
                        device});
  }
};

inline h::Sm90Fp8GemmConfig choose_grouped_config(const GroupedKey& key, int max_smem) {
  for (const auto& c : h::rank_sm90_fp8_grouped_configs(key.gemm_type, key.m, key.groups, key.n, key.k, key.num_sms,
                                                        key.align_m, max_smem)) {
    if (block_m_allowed(c) && c.block_m % key.mult_m == 0 && c.block_n % key.mult_n == 0) {
      auto chosen = with_tuning_knobs(c);
      chosen.dynamic_tiles = dynamic_tiles_enabled();
      return chosen;
    }
  }
  throw std::runtime_error(deep_jit::detail::cat(
      "deep_gemm: no SM90 grouped FP8 GEMM configuration has BLOCK_M dividing the group alignment ", key.align_m,
      " and block sizes that are multiples of (", key.mult_m, ", ", key.mult_n, ") as set_block_size_multiple_of asks"));
}

}  // namespace detail

// The plan for a grouped problem (used by the launcher and by warmup, no GPU).
inline Plan<h::Sm90Fp8GemmConfig> plan_sm90_fp8_grouped(const detail::GroupedKey& key, int max_smem) {
  const auto cfg = detail::choose_grouped_config(key, max_smem);
  const auto kernel = sm90_fp8_grouped_kernel(cfg, key.compiled_m, key.compiled_n, key.compiled_k);
  const std::string name = sm90_fp8_kernel_name(kernel);
  return {cfg, JitContext::get().source(name, sm90_fp8_kernel_source(kernel), name)};
}

class Sm90Fp8GroupedLauncher {
 public:
  static Sm90Fp8GroupedLauncher& get() {
    static Sm90Fp8GroupedLauncher instance;
    return instance;
  }

  void run(const Sm90Fp8GroupedProblem& p, const char* op) {
    const auto& rt = DeviceRuntime::get();
    const auto [mult_m, mult_n] = rt.block_size_multiple_of();
    const detail::GroupedKey key{p.gemm_type,  p.m_for_config, p.groups_for_config, p.n,
                                 p.k,          p.compiled_m,   p.compiled_n,        p.compiled_k,
                                 rt.num_sms(p.device), mult_m, mult_n, p.align_m, p.device};
    const auto& e = cache_.get(key, p.device, op, plan_sm90_fp8_grouped, [&](const h::Sm90Fp8GemmConfig& c) {
      return deep_jit::detail::cat(op, " (", sm90_grouped_type_name(c.gemm_type), ") m=", p.m_for_config, " n=", p.n,
                                   " k=", p.k, " groups=", p.groups_for_config, " -> block ", c.block_m, "x", c.block_n,
                                   ", ", c.stages, " stages, grid ", c.grid_x, ", smem ", c.smem_bytes, " B",
                                   c.mma_overlap ? ", overlapped promotion" : "");
    });
    launch(e, p);
  }

 private:
  using Entry = KernelCache<detail::GroupedKey, h::Sm90Fp8GemmConfig>::Entry;

  static void launch(const Entry& e, const Sm90Fp8GroupedProblem& p) {
    const bool masked = p.gemm_type == static_cast<int>(h::Sm90GroupedType::kMasked);
    const uint64_t kb = static_cast<uint64_t>(h::sm90_ceil_div(p.k, 128));
    const auto specs =
        sm90_fp8_grouped_tensor_maps(e.cfg, static_cast<uint64_t>(p.m), p.n, p.k, p.num_groups,
                                     masked ? kb * p.num_groups : kb, p.lda_bytes, p.ldb_bytes, p.ld_d, masked,
                                     p.a_group_bytes, p.d_group_elems);
    CUtensorMap maps[4];
    for (size_t i = 0; i < 4; ++i) {
      const std::string_view name(specs[i].operand);
      maps[i] = encode_tensor_map(specs[i], name == "a" ? p.a : name == "b" ? p.b : name == "sfa" ? p.sfa : p.d);
    }
    const auto lc = persistent_launch(e.cfg, DeviceRuntime::get().pdl() || p.after_own_kernel);
    const auto m = static_cast<uint32_t>(p.m), n = static_cast<uint32_t>(p.n), k = static_cast<uint32_t>(p.k);
    const auto* sfb = static_cast<const float*>(p.sfb);
    const auto* layout = static_cast<const int*>(p.layout);
    const auto groups = static_cast<uint32_t>(p.num_groups), align_m = static_cast<uint32_t>(p.align_m);
    void* d = p.d;
    const auto ld_d = static_cast<uint32_t>(p.ld_d);
    const uint64_t d_group = masked ? p.d_group_elems : 0;
    if (e.cfg.dynamic_tiles) {
      check_arg(p.tile_counter != nullptr, "m_grouped_fp8_gemm", "internal: no tile counter for a kernel that claims its tiles");
      detail::launch_1d2d(*e.kernel, lc, m, n, k, sfb, layout, groups, align_m, d, ld_d, d_group, maps[0], maps[1],
                          maps[2], maps[3], p.tile_counter);
    } else {
      detail::launch_1d2d(*e.kernel, lc, m, n, k, sfb, layout, groups, align_m, d, ld_d, d_group, maps[0], maps[1],
                          maps[2], maps[3]);
    }
  }

  KernelCache<detail::GroupedKey, h::Sm90Fp8GemmConfig> cache_;
};

}  // namespace deep_gemm::launch
