// Launcher of the SM90 BF16 GEMM kernel (cuda/deep_gemm/impls/sm90_bf16_gemm.cuh), dense
// and m-grouped: its kernel spec, JIT source and tensor maps, its key, plan and launch, on
// the framework of launch/common.hpp.
//
// LAUNCH CONTRACT: grid {cfg.grid_x} (persistent; split K: tiles x splits, one tile per CTA),
// block {cfg.num_threads}, shared cfg.smem_bytes, cluster 1 (split K: cfg.splits; CTA pairs
// sharing B, cfg.pair_b: 2). Kernel
// arguments:
//   (uint32 m, uint32 n, uint32 k, CUtensorMap a, CUtensorMap b, CUtensorMap d,
//    OutT* d, const OutT* c /*may be d, or null*/, uint32 ld_d /*elements*/,
//    const int* grouped_layout, uint32 num_groups, uint32 align_m, uint32 num_batches,
//    uint32 split_units /*split K: batches (batched K) or K blocks per split; else 0*/,
//    uint64 d_group_stride /*elements; masked: from one group's D to the next*/)
//   m: M (dense), M_sum (contiguous, psum) or max rows per group (masked; grouped_layout
//   null: every group has all of them).
//   Tensor maps (bf16, 128B swizzle): A K-major [rows][K] box 64 x block_m (m-grouped: 64 x
//   64, the kernel loading a tile's A in 64-row boxes), or MN-major
//   [K][M] box 64 x 64; B K-major [G * N][K] box 64 x block_n, or MN-major [G * K][N] box
//   64 x 64; D (staged bf16 only; otherwise A's map stands in, unused) [rows][N] box
//   swizzle_d / 2 x 64. Masked: A and D are rank-3 maps [G][max_m][.] (box 1 group deep)
//   whose groups lie a_group_bytes and d_group_elems apart: any 16-byte multiple, so the
//   groups may interleave (einsum's heads).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "../heuristics/sm90_bf16_gemm.hpp"
#include "common.hpp"

namespace deep_gemm::launch {

struct Sm90Bf16Problem {
  int m = 0, n = 0, k = 0;
  int compiled_m = 0, compiled_n = 0, compiled_k = 0;  // 0 = runtime argument
  int device = 0;
  bool mn_major_a = false, mn_major_b = false;
  bool fp32_out = false, with_c = false;
  int gemm_type = 0;              // 0 dense, 1 contiguous, 2 masked, 3 psum
  int num_groups = 1;
  int m_for_config = 0, groups_for_config = 1;  // how the heuristics cost it
  int align_m = 1;
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;
  void* d = nullptr;
  const int* layout = nullptr;
  // Pitches in bytes of the operands' outer dimension (K-major: row pitch; MN-major: the
  // pitch between K rows), and D's row pitch in elements. a_rows: A's rows as a 2-D view.
  uint64_t lda_bytes = 0, ldb_bytes = 0, ld_d = 0;
  uint64_t a_rows = 0, d_rows = 0;
  // Masked: the strides from one group of A (bytes) and of D (elements) to the next.
  uint64_t a_group_bytes = 0, d_group_elems = 0;
  // einsum bmk,bnk->mn: the K loop sums `num_batches` batches (0: not batched); A and B are
  // [batch][rows][K] K-major with these batch strides.
  int num_batches = 0;
  uint64_t a_batch_bytes = 0, b_batch_bytes = 0;
  // Split K may cut the K loop into runs of whole units (heuristics::choose_sm90_bf16_split):
  // `split_units_total` units (K blocks of a dense GEMM, or the batches) of
  // `k_blocks_per_unit` K blocks each; 0: never split (the m-grouped forms).
  int split_units_total = 0, k_blocks_per_unit = 1;
  // Split K over a workspace (heuristics::sm90_bf16_workspace_split, chosen by the op, which
  // reduces it): ws_splits runs of ws_split_units units into the FP32 [ws_splits][m][ld_d] d.
  int ws_splits = 0, ws_split_units = 0;
  bool all_rows = false;  // masked without masked_m: every group has all m rows (einsum's heads)
};

// What one compiled kernel is.
struct Sm90Bf16KernelSpec {
  uint32_t compiled_m = 0, compiled_n = 0, compiled_k = 0;
  uint32_t block_m = 128, block_n = 128, stages = 4, group_n = 16;
  bool mn_major_a = false, mn_major_b = false, fp32_out = false, with_c = false;
  int gemm_type = 0;
  bool batched_k = false, split_k = false;
  bool direct_d = false;  // a dense bf16 D stored from registers (no staging tile)
  bool pair_b = false;    // CTA pairs multicasting halves of B (the kernel's kPairB)
  bool evict_first_b = false;  // B loaded under L2's evict-first policy (kEvictFirstB)
  int smem_bytes = 0;
};

inline std::string sm90_bf16_kernel_name(const Sm90Bf16KernelSpec& s) {
  static const char* tags[] = {"", "_mgc", "_mgm", "_mgp"};
  const auto u = [](uint32_t v) { return std::to_string(v); };
  // The layout letters as the API names them: A K-major 'n', MN-major 't'; B K-major 't', MN-major 'n'.
  const std::string layout = std::string(s.mn_major_a ? "t" : "n") + (s.mn_major_b ? "n" : "t");
  return "sm90_bf16_gemm_" + layout + tags[s.gemm_type >= 0 && s.gemm_type <= 3 ? s.gemm_type : 0] +
         (s.fp32_out ? "_f32" : "_bf16") + (s.with_c ? "_c" : "") + "_m" + u(s.compiled_m) + "n" + u(s.compiled_n) + "k" +
         u(s.compiled_k) + "_b" + u(s.block_m) + "x" + u(s.block_n) + "_s" + u(s.stages) + "_g" + u(s.group_n) +
         (s.batched_k ? "_bk" : "") + (s.split_k ? "_sk" : "") + (s.direct_d ? "_dd" : "") + (s.pair_b ? "_pb" : "") +
         (s.evict_first_b ? "_efb" : "");
}

inline std::string sm90_bf16_kernel_source(const Sm90Bf16KernelSpec& s) {
  const char* out_t = s.fp32_out ? "float" : "__nv_bfloat16";
  TemplateArgs t;
  t.always(s.compiled_m).always(s.compiled_n).always(s.compiled_k).always(s.block_m).always(s.block_n);
  t.always(s.stages).always(s.group_n).always_bool(s.mn_major_a).always_bool(s.mn_major_b);
  t.always(std::string(out_t)).always_bool(s.with_c);
  t.trailing(std::string("deep_gemm::GemmType::") + (s.gemm_type == 1   ? "kMGroupedContiguous"
                                                      : s.gemm_type == 2 ? "kMGroupedMasked"
                                                      : s.gemm_type == 3 ? "kMGroupedContiguousPsum"
                                                                         : "kNormal"),
             s.gemm_type == 0 && !s.batched_k && !s.split_k);
  t.trailing_bool(s.batched_k, false);
  t.trailing_bool(s.split_k, false);
  t.trailing_bool(s.direct_d, false);
  t.trailing_bool(s.pair_b, false);
  t.trailing_bool(s.evict_first_b, false);
  std::string code = smem_bytes_define(s.smem_bytes);
  code += "#include <deep_gemm/impls/sm90_bf16_gemm.cuh>\n\n";
  code += "extern \"C\" __global__ void __launch_bounds__(384, 1)\n";
  code += sm90_bf16_kernel_name(s) + "(uint32_t m, uint32_t n, uint32_t k,\n"
          "         const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,\n"
          "         const __grid_constant__ CUtensorMap tmap_d, " + out_t + "* d, const " + out_t + "* c, uint32_t ld_d,\n"
          "         const int* grouped_layout, uint32_t num_groups, uint32_t align_m, uint32_t num_batches,\n"
          "         uint32_t split_units, uint64_t d_group_stride) {\n";
  code += "    deep_gemm::sm90_bf16_gemm_impl<" + t.str() +
          ">(\n        m, n, k, &tmap_a, &tmap_b, &tmap_d, d, c, ld_d, grouped_layout, num_groups, align_m, "
          "num_batches, split_units, d_group_stride);\n}\n";
  return code;
}

// The tensor maps of a launch, in argument order (a, b, d).
inline std::vector<Sm90TensorMapSpec> sm90_bf16_tensor_maps(const h::Sm90Bf16GemmConfig& c, const Sm90Bf16Problem& p) {
  const uint64_t k = static_cast<uint64_t>(p.k), n = static_cast<uint64_t>(p.n);
  const uint64_t g = static_cast<uint64_t>(p.num_groups);
  const auto bm = static_cast<uint32_t>(c.block_m), bn = static_cast<uint32_t>(c.block_n);
  const uint32_t a_box_rows = p.gemm_type != 0 ? 64 : bm;  // the kernel's kABoxes
  std::vector<Sm90TensorMapSpec> maps;
  if (p.num_batches > 0) {  // batched K: [batch][rows][K], K-major, box 1 batch deep
    const uint64_t batches = static_cast<uint64_t>(p.num_batches);
    maps.push_back({"a", Sm90TmaDtype::kBF16, k, p.a_rows, p.lda_bytes, 64, bm, 128, batches, p.a_batch_bytes});
    maps.push_back({"b", Sm90TmaDtype::kBF16, k, n, p.ldb_bytes, 64, bn, 128, batches, p.b_batch_bytes});
  } else if (p.gemm_type == 2) {  // masked: A [G][max_m][K] (K-major), B as below
    maps.push_back({"a", Sm90TmaDtype::kBF16, k, p.a_rows, p.lda_bytes, 64, a_box_rows, 128, g, p.a_group_bytes});
  } else {
    maps.push_back(p.mn_major_a ? Sm90TensorMapSpec{"a", Sm90TmaDtype::kBF16, p.a_rows, k, p.lda_bytes, 64, 64, 128}
                                : Sm90TensorMapSpec{"a", Sm90TmaDtype::kBF16, k, p.a_rows, p.lda_bytes, 64, a_box_rows, 128});
  }
  if (p.num_batches == 0)
    maps.push_back(p.mn_major_b ? Sm90TensorMapSpec{"b", Sm90TmaDtype::kBF16, n, k * g, p.ldb_bytes, 64, 64, 128}
                                : Sm90TensorMapSpec{"b", Sm90TmaDtype::kBF16, k, n * g, p.ldb_bytes, 64,
                                                    c.pair_b ? bn / 2 : bn, 128});
  const uint64_t d_batches = p.gemm_type == 2 ? g : 0;
  if (c.staged_d)
    maps.push_back({"d", Sm90TmaDtype::kBF16, n, p.d_rows, p.ld_d * 2, static_cast<uint32_t>(c.swizzle_d / 2), 64,
                    c.swizzle_d, d_batches, p.d_group_elems * 2});
  else
    maps.push_back(maps[0]);  // not read by the kernel: A's map keeps the argument valid
  return maps;
}

namespace detail {

struct Bf16ConfigKey {
  int m, n, k, compiled_m, compiled_n, compiled_k, num_sms, mult_m, mult_n, device;
  bool mn_major_a, mn_major_b, fp32_out, with_c;
  int gemm_type, m_for_config, groups_for_config, align_m;
  bool batched_k = false;
  int k_for_config = 0;  // batched K: the K one tile sums, as the heuristics cost it (0: k)
  int split_units_total = 0, k_blocks_per_unit = 1;  // split K (Sm90Bf16Problem)
  int ws_splits = 0, ws_split_units = 0;
  bool all_rows = false;  // Sm90Bf16Problem::all_rows
  bool operator==(const Bf16ConfigKey&) const = default;
  size_t hash() const {
    return hash_fields({m, n, k, compiled_m, compiled_n, compiled_k, num_sms, mult_m, mult_n, device, int(mn_major_a),
                        int(mn_major_b), int(fp32_out), int(with_c), gemm_type, m_for_config, groups_for_config,
                        align_m, int(batched_k), k_for_config, split_units_total, k_blocks_per_unit, ws_splits,
                        ws_split_units, int(all_rows)});
  }
};

// Developer knobs of the configuration (DG_DEV_SM90_BF16_{BLOCK_M,BLOCK_N,STAGES,DIRECT_D,
// SPLITS,GROUP_N,PAIR_B}), for measuring configurations the ranking would not pick; unset (0):
// the ranking's choice. Set, they apply to every BF16 GEMM but einsum's workspace split, and turn
// split K off unless SPLITS (a cluster of that many CTAs per tile, dense GEMMs) says more than 1;
// with SPLITS, BLOCK_M, BLOCK_N and STAGES shape the split tile, and DIRECT_D, GROUP_N and
// PAIR_B (nothing to act on: one tile per CTA, stored directly) are refused.
// PAIR_B: CTA pairs on one n-block's two m-blocks multicast halves of B (dense, K-major B, an
// even number of m-blocks; otherwise an error). EVICT_FIRST_B (0 or 1) overrides whether B is
// loaded under L2's evict-first policy (heuristics::sm90_bf16_b_read_once; every form but
// einsum's batched K), and leaves the rest of the choice alone.
struct Bf16DevKnobs {
  int block_m = 0, block_n = 0, stages = 0, splits = 0, group_n = 0;
  int evict_first_b = -1;  // -1: unset
  bool direct_d = false, pair_b = false;
  bool any() const { return block_m || block_n || stages || direct_d || splits || group_n || pair_b; }
};
inline const Bf16DevKnobs& bf16_dev_knobs() {
  static const Bf16DevKnobs k = [] {
    Bf16DevKnobs v;
    v.block_m = env_int_knob("DG_DEV_SM90_BF16_BLOCK_M", [](int x) { return x == 0 || x == 64 || x == 128; }, "64 or 128");
    v.block_n = env_int_knob("DG_DEV_SM90_BF16_BLOCK_N", [](int x) { return x % 16 == 0 && x <= 256; },
                             "a multiple of 16 up to 256");
    v.stages = env_int_knob("DG_DEV_SM90_BF16_STAGES", [](int x) { return x == 0 || (x >= 2 && x <= h::kSm90Bf16MaxStages); },
                            "in [2, 16]");
    v.direct_d = env_bool_knob("DG_DEV_SM90_BF16_DIRECT_D", false);
    v.pair_b = env_bool_knob("DG_DEV_SM90_BF16_PAIR_B", false);
    v.splits = env_int_knob("DG_DEV_SM90_BF16_SPLITS", [](int x) { return x >= 0 && x <= 8; }, "in [0, 8]");
    v.group_n = env_int_knob("DG_DEV_SM90_BF16_GROUP_N", [](int x) { return x >= 0 && x <= 64; }, "in [1, 64]");
    v.evict_first_b = env_override_knob("DG_DEV_SM90_BF16_EVICT_FIRST_B");
    return v;
  }();
  return k;
}

// DG_DEV_SM90_BF16_STAGES on a split configuration: a ring of that depth, if it fits and still
// holds the FP32 tile the reduction parks in the stage memory.
inline h::Sm90Bf16GemmConfig with_split_stages(h::Sm90Bf16GemmConfig c, int stages, int max_smem) {
  const int fit = h::sm90_bf16_fit_stages(c.block_m, c.block_n, false, max_smem);
  c.stages = stages;
  if (stages > fit || !h::sm90_bf16_split_tile_ok(c))
    throw std::runtime_error(deep_jit::detail::cat("deep_gemm: DG_DEV_SM90_BF16_STAGES=", stages, " does not fit ", c.block_m,
                                                   "x", c.block_n, " split tiles (at most ", fit,
                                                   ", and enough to park the FP32 tile)"));
  c.smem_bytes = h::sm90_bf16_smem_bytes(c.block_m, c.block_n, c.stages, false);
  return c;
}

inline h::Sm90Bf16GemmConfig choose_bf16_config(const Bf16ConfigKey& key, int max_smem) {
  if (key.ws_splits > 0) {  // split K over a workspace: one CTA per (tile, split)
    const int k = key.ws_split_units * key.k_blocks_per_unit * h::kSm90Bf16BlockK;
    for (auto c : h::rank_sm90_bf16_gemm_configs(key.m_for_config, key.n, k, key.num_sms, false, false, false, 4,
                                                 max_smem, key.ws_splits, 0, 128, false)) {
      if (c.block_m % key.mult_m != 0 || c.block_n % key.mult_n != 0 || !h::sm90_bf16_split_tile_ok(c)) continue;
      const long tiles = static_cast<long>(h::sm90_ceil_div(key.m_for_config, c.block_m)) * h::sm90_ceil_div(key.n, c.block_n);
      c.splits = key.ws_splits;
      c.split_units = key.ws_split_units;
      c.grid_x = static_cast<int>(tiles * key.ws_splits);
      return c;
    }
  }
  const auto& knobs = bf16_dev_knobs();
  const bool staged = !key.fp32_out && !key.with_c && !(knobs.direct_d && key.gemm_type == 0);
  auto ranked = h::rank_sm90_bf16_gemm_configs(key.m_for_config, key.n, key.k_for_config > 0 ? key.k_for_config : key.k,
                                               key.num_sms, key.mn_major_a, key.mn_major_b, staged,
                                               key.fp32_out ? 4 : 2, max_smem, key.groups_for_config, key.gemm_type,
                                               key.align_m, key.with_c);
  if (key.gemm_type == 2 && !key.all_rows) h::prefer_sm90_bf16_masked_tile(ranked, key.m_for_config);
  if (key.gemm_type == 2 && key.all_rows) h::walk_sm90_bf16_heads_by_n_block(ranked);
  for (auto c : ranked) {
    if (c.block_m % key.mult_m != 0 || c.block_n % key.mult_n != 0) continue;
    if (knobs.splits > 1 && key.split_units_total > 0) {
      const auto sc = h::choose_sm90_bf16_split(c, key.m_for_config, key.n, key.split_units_total, key.k_blocks_per_unit,
                                                key.num_sms, key.mn_major_a, key.mn_major_b, key.fp32_out ? 4 : 2,
                                                max_smem, key.with_c, key.mult_m, key.mult_n, knobs.splits,
                                                knobs.block_n, knobs.block_m);
      if (sc.splits != knobs.splits) throw std::runtime_error("deep_gemm: DG_DEV_SM90_BF16_SPLITS: no such split configuration");
      if (knobs.pair_b || knobs.direct_d || knobs.group_n)
        throw std::runtime_error("deep_gemm: DG_DEV_SM90_BF16_{PAIR_B,DIRECT_D,GROUP_N} do not combine with SPLITS");
      if (knobs.stages) return with_split_stages(sc, knobs.stages, max_smem);
      return sc;
    }
    if (knobs.any()) {
      if ((knobs.block_m && c.block_m != knobs.block_m) || (knobs.block_n && c.block_n != knobs.block_n)) continue;
      if (knobs.stages) {
        // Bounded by what fits, not by the ranking's pick (fewer for short K).
        const int fit = h::sm90_bf16_fit_stages(c.block_m, c.block_n, c.staged_d, max_smem);
        if (knobs.stages > fit)
          throw std::runtime_error(deep_jit::detail::cat("deep_gemm: DG_DEV_SM90_BF16_STAGES=", knobs.stages, " does not fit ",
                                                         c.block_m, "x", c.block_n, " tiles (at most ", fit, ")"));
        c.stages = knobs.stages;
        c.smem_bytes = h::sm90_bf16_smem_bytes(c.block_m, c.block_n, c.stages, c.staged_d);
      }
      if (knobs.group_n) c.group_n = knobs.group_n;
      if (knobs.pair_b) {
        const int m_blocks = h::sm90_ceil_div(std::max(key.m_for_config, 1), c.block_m);
        if (key.gemm_type != 0 || key.batched_k || key.mn_major_b || m_blocks % 2 != 0)
          throw std::runtime_error(deep_jit::detail::cat(
              "deep_gemm: DG_DEV_SM90_BF16_PAIR_B needs a dense GEMM with a K-major B and an even number of ",
              c.block_m, "-row blocks (M = ", key.m_for_config, ")"));
        h::sm90_bf16_pair_up(c);
      }
      return c;
    }
    if (key.split_units_total == 0) return c;
    if (key.gemm_type == 0 && !key.batched_k && key.k_blocks_per_unit == 1 && 64 % key.mult_m == 0 &&
        64 % key.mult_n == 0) {
      if (const auto pair = h::sm90_bf16_pair_b_config(key.m_for_config, key.n, key.k, key.num_sms, key.mn_major_a,
                                                       key.mn_major_b, c.staged_d, max_smem))
        return *pair;
    }
    return h::choose_sm90_bf16_split(c, key.m_for_config, key.n, key.split_units_total, key.k_blocks_per_unit,
                                     key.num_sms, key.mn_major_a, key.mn_major_b, key.fp32_out ? 4 : 2, max_smem,
                                     key.with_c, key.mult_m, key.mult_n);
  }
  throw std::runtime_error(deep_jit::detail::cat("deep_gemm: no SM90 BF16 GEMM configuration has block sizes that are "
                                                 "multiples of (", key.mult_m, ", ", key.mult_n,
                                                 ") as set_block_size_multiple_of asks"));
}

}  // namespace detail

inline Plan<h::Sm90Bf16GemmConfig> plan_sm90_bf16_gemm(const detail::Bf16ConfigKey& key, int max_smem) {
  auto cfg = detail::choose_bf16_config(key, max_smem);
  cfg.evict_first_b = detail::knob_or_rule(detail::bf16_dev_knobs().evict_first_b, !key.batched_k,
                                           h::sm90_bf16_b_read_once(cfg, key.m_for_config, key.n, key.k, key.batched_k));
  Sm90Bf16KernelSpec s;
  s.compiled_m = static_cast<uint32_t>(key.compiled_m);
  s.compiled_n = static_cast<uint32_t>(key.compiled_n);
  s.compiled_k = static_cast<uint32_t>(key.compiled_k);
  s.block_m = static_cast<uint32_t>(cfg.block_m);
  s.block_n = static_cast<uint32_t>(cfg.block_n);
  s.stages = static_cast<uint32_t>(cfg.stages);
  s.group_n = static_cast<uint32_t>(cfg.group_n);
  s.mn_major_a = key.mn_major_a;
  s.mn_major_b = key.mn_major_b;
  s.fp32_out = key.fp32_out;
  s.with_c = key.with_c;
  s.gemm_type = key.gemm_type;
  s.batched_k = key.batched_k;
  s.split_k = cfg.splits > 1;
  s.direct_d = !key.fp32_out && !key.with_c && !cfg.staged_d && cfg.splits <= 1;
  s.pair_b = cfg.pair_b;
  s.evict_first_b = cfg.evict_first_b;
  s.smem_bytes = cfg.smem_bytes;
  const std::string name = sm90_bf16_kernel_name(s);
  return {cfg, JitContext::get().source(name, sm90_bf16_kernel_source(s), name)};
}

class Sm90Bf16GemmLauncher {
 public:
  static Sm90Bf16GemmLauncher& get() {
    static Sm90Bf16GemmLauncher instance;
    return instance;
  }

  void run(const Sm90Bf16Problem& p, const char* op) {
    const auto& rt = DeviceRuntime::get();
    const auto [mult_m, mult_n] = rt.block_size_multiple_of();
    const detail::Bf16ConfigKey key{p.m,          p.n,          p.k,        p.compiled_m, p.compiled_n,
                                    p.compiled_k, rt.num_sms(p.device), mult_m, mult_n, p.device,
                                    p.mn_major_a, p.mn_major_b, p.fp32_out, p.with_c,     p.gemm_type,
                                    p.m_for_config, p.groups_for_config, p.align_m, p.num_batches > 0,
                                    p.num_batches * p.k, p.split_units_total, p.k_blocks_per_unit,
                                    p.ws_splits, p.ws_split_units, p.all_rows};
    const auto& e = cache_.get(key, p.device, op, plan_sm90_bf16_gemm, [&](const h::Sm90Bf16GemmConfig& c) {
      return deep_jit::detail::cat(op, " m=", p.m, " n=", p.n, " k=", p.k, " -> block ", c.block_m, "x", c.block_n, ", ",
                                   c.stages, " stages, grid ", c.grid_x, ", smem ", c.smem_bytes, " B",
                                   c.splits > 1 ? deep_jit::detail::cat(", K split ", c.splits, " ways") : "");
    });
    const auto specs = sm90_bf16_tensor_maps(e.cfg, p);
    const CUtensorMap ma = encode_tensor_map(specs[0], p.a);
    const CUtensorMap mb = encode_tensor_map(specs[1], p.b);
    const CUtensorMap md = encode_tensor_map(specs[2], specs[2].operand[0] == 'd' ? p.d : p.a);
    const auto lc = persistent_launch(e.cfg, DeviceRuntime::get().pdl());
    const auto m = static_cast<uint32_t>(p.m), n = static_cast<uint32_t>(p.n), k = static_cast<uint32_t>(p.k);
    const auto ld_d = static_cast<uint32_t>(p.ld_d);
    const auto groups = static_cast<uint32_t>(p.num_groups), align = static_cast<uint32_t>(p.align_m);
    const auto batches = static_cast<uint32_t>(std::max(p.num_batches, 1));
    const auto per_split = static_cast<uint32_t>(e.cfg.splits > 1 ? e.cfg.split_units : 0);
    deep_jit::launch(*e.kernel, lc, m, n, k, ma, mb, md, p.d, p.c, ld_d, p.layout, groups, align, batches, per_split,
                     p.d_group_elems);
  }

 private:
  KernelCache<detail::Bf16ConfigKey, h::Sm90Bf16GemmConfig> cache_;
};

}  // namespace deep_gemm::launch
