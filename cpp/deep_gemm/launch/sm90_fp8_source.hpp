// What a configuration of the SM90 FP8 GEMMs (dense 1D2D and 1D1D, m-grouped, k-grouped)
// compiles and how it is launched: the kernel spec and its JIT entry source and name, the
// tensor maps, and the launch contract the launchers (launch/sm90_fp8_*.hpp) honour. The
// configurations themselves come from heuristics/sm90_fp8_*.hpp.
//
// Pure C++17, no CUDA, torch or deep_jit headers (tests/test_heuristics.py and
// tools/kernel_bench compile it as host code).
//
// ---------------------------------------------------------------------------------------
// LAUNCH CONTRACT of a dense GEMM (configuration `cfg` for shape m, n, k):
//
//   spec   = sm90_fp8_gemm_kernel(cfg, compiled_m, compiled_n, compiled_k)  (0 = runtime)
//   kernel = deep_jit compile {name = sm90_fp8_kernel_name(spec),
//                              code = sm90_fp8_kernel_source(spec), entry = name,
//                              arch sm_90a, include_dirs = {<cuda/ root>}}
//   grid   = {cfg.grid_x, 1, 1}         (persistent: <= #SMs, a multiple of cfg.cluster,
//                                        balanced: the fewest CTAs for the same waves;
//                                        with cluster 2 also clamp to
//                                        2 * cuOccupancyMaxActiveClusters(kernel, cfg):
//                                        every CTA must be resident. 66 on the H200.)
//   block  = {cfg.num_threads, 1, 1}    (256 for block_m 64, 384 for block_m 128)
//   shared = cfg.smem_bytes             (dynamic; needs MAX_DYNAMIC_SHARED_SIZE_BYTES)
//   cluster_dim = {cfg.cluster, 1, 1}   (pass the cluster attribute even when 1 is fine)
//
//   Tensor maps: sm90_fp8_gemm_tensor_maps(cfg, m, n, k, ...) returns them in argument
//   order; each maps to make_tensor_map_2d(base, dtype, inner, outer, outer_stride_bytes,
//   box_inner, box_outer, swizzle) (Sm90TensorMapSpec). Boxes of the rows that exist
//   (cluster 1; the kernel expects that many bytes per stage): with cfg.fit_m (M < BLOCK_M)
//   the A and SFA boxes cover only M rows (sm90_fp8_fit_box_rows); with cfg.tail_m (M >
//   BLOCK_M, where BLOCK_M-row boxes would reach far past M: h::sm90_fp8_tail_boxes_pay)
//   two more maps, of A and SFA, serve the last m-block with boxes of its rows
//   (sm90_fp8_tail_box_rows).
//
//   Kernel arguments, in order:
//   1D2D: (uint32 m, uint32 n, uint32 k, const float* sfb,
//          CUtensorMap a, CUtensorMap b, CUtensorMap sfa, CUtensorMap d)
//   1D2D, cfg.sfa_from_global (no SFA tensor map; SFA fp32 [M, K/128] at any strides):
//         (uint32 m, uint32 n, uint32 k, const float* sfb, const float* sfa,
//          uint32 sfa_stride_m, uint32 sfa_stride_k /*elements*/, CUtensorMap a, CUtensorMap b, CUtensorMap d)
//   1D1D: (uint32 m, uint32 n, uint32 k, const float* c /*may be d, or null*/, float* d,
//          uint32 ld_d /*elements, even*/,
//          CUtensorMap a, CUtensorMap b, CUtensorMap sfa, CUtensorMap sfb)
//   cfg.tail_m: then CUtensorMap a_tail and (unless sfa_from_global) sfa_tail.
//   (tensor maps by value: the entry declares them const __grid_constant__).
//
//   Preconditions the launcher checks: k > 0 (a partial last K block reads zeros past K),
//   m > 0 (m == 0: skip launch), A/B K-major with row pitch % 16 == 0 bytes, 16-byte
//   aligned bases, SFA (and 1D1D SFB) MN-major fp32 [ceil(k/128), align(mn, 4)], 1D2D SFB
//   fp32 row-major [ceil(n/128), ceil(k/128)],
//   1D2D D bf16 row-major with row pitch % 16 bytes == 0 (n % 8 == 0 if packed),
//   1D1D C/D fp32 row-major, ld_d even, 8-byte aligned.
//
// LAUNCH CONTRACT of an m-grouped GEMM (the 1D2D kernel with an m-grouped scheduler, always
// cluster 1): spec = sm90_fp8_grouped_kernel(cfg, ...), grid = {cfg.grid_x} (masked and psum
// launch every SM: their tile count lives on the GPU).
//   Kernel arguments: (uint32 m, uint32 n, uint32 k, const float* sfb, const int* grouped_layout,
//                      uint32 num_groups, uint32 align_m, bf16* d, uint32 ld_d /*elements*/,
//                      uint64 d_group_stride /*elements; masked: from one group's D to the next*/,
//                      CUtensorMap a, CUtensorMap b, CUtensorMap sfa, CUtensorMap d
//                      [, int* tile_counter /*cfg.dynamic_tiles: 0 at launch*/])
//   m: M_sum (contiguous, psum) or max rows per group (masked). Tensor maps:
//   sm90_fp8_grouped_tensor_maps.
//
// LAUNCH CONTRACT of a k-grouped GEMM (per launch of at most kSm90KGroupedMaxGroups groups):
//   spec   = sm90_fp8_k_grouped_kernel(cfg, compiled_m, compiled_n)   (0 = runtime)
//   grid   = {cfg.grid_x}  (<= #SMs and <= the launch's tile count), block = {cfg.num_threads},
//   shared = cfg.smem_bytes, cluster 1.
//   Kernel arguments: (uint32 m, uint32 n, const float* c /*group g0's slice, may be d, or null*/,
//                      float* d /*group g0's slice*/, CUtensorMap sfa, CUtensorMap sfb,
//                      KGroupedArgs args /*by value, ~8.5 KB*/)
//   Tensor maps: sm90_fp8_k_grouped_sf_maps and sm90_fp8_k_grouped_group_maps. A and B maps
//   are per group (row pitch k_g) and go into args; SFA / SFB cover the whole call
//   ([sum_k/128, align(mn, 4)]) and the kernel offsets their K-block row by args.kb_offset[g].
//   Preconditions: every k_g % 128 == 0, N even (8-byte stores), C/D fp32 [G, M, N]
//   contiguous, A/B flat nt layout with 16-byte aligned bases.
// ---------------------------------------------------------------------------------------
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../heuristics/sm90_fp8_gemm.hpp"
#include "sm90_source.hpp"

namespace deep_gemm::launch {

namespace h = deep_gemm::heuristics;

// Groups per k-grouped launch: the capacity of KGroupedArgs (the device struct is
// instantiated with it). 32 keeps the parameter at ~8.5 KB (the limit is 32 KB); more groups
// take more launches.
constexpr int kSm90KGroupedMaxGroups = 32;

// Diagnostics: DG_DEV_TRACE_TILES=1 (read once per process) builds the 1D2D kernels with tile
// boundary stamps (common/sm90_fp8_core.cuh) and one more entry argument, the stamp buffer,
// which the launchers take from DG_DEV_TRACE_TILES_PTR (a device address, decimal). For
// tools/device/tile_trace.py; never set in production (the stamps cost time).
inline bool trace_tiles_enabled() {
  static const bool on = [] {
    if (const char* old = std::getenv("DG_TRACE_TILES"); old && *old)
      throw std::runtime_error("deep_gemm: DG_TRACE_TILES is now named DG_DEV_TRACE_TILES (a developer knob)");
    const char* v = std::getenv("DG_DEV_TRACE_TILES");
    if (!v || !*v) return false;
    const std::string s(v);
    if (s != "0" && s != "1") throw std::runtime_error("deep_gemm: DG_DEV_TRACE_TILES must be 0 or 1, got '" + s + "'");
    return s == "1";
  }();
  return on;
}

// The device's GemmType (scheduler/tile_scheduler.cuh) of a config's gemm_type.
inline const char* sm90_grouped_type_name(int t) {
  switch (t) {
    case 1: return "kMGroupedContiguous";
    case 2: return "kMGroupedMasked";
    case 3: return "kMGroupedContiguousPsum";
    default: return "kNormal";
  }
}

// ---- the kernel spec: what one compiled kernel is ---------------------------------------

// The entry a spec renders (its signature and name).
enum class Sm90Fp8Entry { kDense, kMGrouped, kKGrouped };
// How a dense GEMM's A and SFA boxes cover its rows: sm90::MBoxes (common/sm90_fp8_core.cuh).
enum class Sm90MBoxes { kBlock, kFitM, kTail };

// Everything the entry source and its name depend on, by name. The impl templates'
// parameters, in order (trailing defaults are not written):
//   sm90_fp8_gemm_1d2d_impl<compiled_m, compiled_n, compiled_k, block_m, block_n, stages,
//       cluster, group_n, mma_overlap, gemm_type, sfa_from_global, dynamic_tiles, m_boxes,
//       ColMap (head_left/mid/right), evict_first_b>
//   sm90_fp8_gemm_1d1d_impl<compiled_m, compiled_n, compiled_k, block_m, block_n, stages,
//       cluster, group_n, m_boxes, OutT (bf16_out)>
//   sm90_fp8_k_grouped_impl<compiled_m, compiled_n, block_m, block_n, stages, group_n, max_groups>
struct Sm90Fp8KernelSpec {
  Sm90Fp8Entry entry = Sm90Fp8Entry::kDense;
  h::Sm90Fp8Kind kind = h::Sm90Fp8Kind::k1D2D;  // the impl: 1D2D (bf16 out) or 1D1D (fp32 out; k-grouped)
  uint32_t compiled_m = 0, compiled_n = 0, compiled_k = 0;  // 0 = runtime argument (k-grouped: no K)
  uint32_t block_m = 128, block_n = 128, stages = 4, cluster = 1, group_n = 16;
  bool mma_overlap = false;      // 1D2D
  int gemm_type = 0;             // 1D2D: 0 = GemmType::kNormal, else an h::Sm90GroupedType
  bool sfa_from_global = false;  // dense 1D2D: SFA pointer and strides instead of its tensor map
  bool dynamic_tiles = false;    // m-grouped: the entry takes the tile counter
  Sm90MBoxes m_boxes = Sm90MBoxes::kBlock;  // dense
  bool evict_first_b = false;    // dense 1D2D: B under L2's evict-first policy
  uint32_t max_groups = 0;       // k-grouped: KGroupedArgs capacity
  bool trace_tiles = false;      // 1D2D: built for a tile trace (trace_tiles_enabled())
  int smem_bytes = 0;            // the launch's dynamic shared memory (DG_SMEM_BYTES)
  bool bf16_out = false;         // dense 1D1D: OutT = __nv_bfloat16 (D = A B^T, no C)
  // dense 1D2D, fp8_gemm_nt_skip_head_mid: ColMap = SkipHeadMid<head_left, head_mid,
  // head_right> (heads of head_left + head_right product columns; active when head_left > 0)
  uint32_t head_left = 0, head_mid = 0, head_right = 0;
};

namespace detail {
inline Sm90Fp8KernelSpec spec_of(const h::Sm90Fp8GemmConfig& c, Sm90Fp8Entry entry, int compiled_m, int compiled_n,
                                 int compiled_k) {
  Sm90Fp8KernelSpec s;
  s.entry = entry;
  s.kind = c.kind;
  s.compiled_m = static_cast<uint32_t>(compiled_m);
  s.compiled_n = static_cast<uint32_t>(compiled_n);
  s.compiled_k = static_cast<uint32_t>(compiled_k);
  s.block_m = static_cast<uint32_t>(c.block_m);
  s.block_n = static_cast<uint32_t>(c.block_n);
  s.stages = static_cast<uint32_t>(c.stages);
  s.cluster = static_cast<uint32_t>(c.cluster);
  s.group_n = static_cast<uint32_t>(c.group_n);
  s.mma_overlap = c.mma_overlap;
  s.smem_bytes = c.smem_bytes;
  return s;
}
}  // namespace detail

// The kernel of a dense configuration. compiled_{m,n,k}: a dimension baked into the kernel,
// or 0 for a runtime argument (the API's compiled_dims).
inline Sm90Fp8KernelSpec sm90_fp8_gemm_kernel(const h::Sm90Fp8GemmConfig& c, int compiled_m, int compiled_n,
                                              int compiled_k) {
  auto s = detail::spec_of(c, Sm90Fp8Entry::kDense, compiled_m, compiled_n, compiled_k);
  s.sfa_from_global = c.sfa_from_global;
  s.m_boxes = c.fit_m ? Sm90MBoxes::kFitM : c.tail_m ? Sm90MBoxes::kTail : Sm90MBoxes::kBlock;
  s.trace_tiles = c.kind == h::Sm90Fp8Kind::k1D2D && trace_tiles_enabled();
  s.evict_first_b = c.kind == h::Sm90Fp8Kind::k1D2D && c.evict_first_b;
  return s;
}

// The kernel of an m-grouped configuration (cluster 1).
inline Sm90Fp8KernelSpec sm90_fp8_grouped_kernel(const h::Sm90Fp8GemmConfig& c, int compiled_m, int compiled_n,
                                                 int compiled_k) {
  auto s = detail::spec_of(c, Sm90Fp8Entry::kMGrouped, compiled_m, compiled_n, compiled_k);
  s.kind = h::Sm90Fp8Kind::k1D2D;
  s.cluster = 1;
  s.gemm_type = c.gemm_type;
  s.dynamic_tiles = c.dynamic_tiles;
  s.trace_tiles = trace_tiles_enabled();
  return s;
}

// The kernel of a k-grouped configuration (the groups' K sizes are runtime arguments).
inline Sm90Fp8KernelSpec sm90_fp8_k_grouped_kernel(const h::Sm90Fp8GemmConfig& c, int compiled_m, int compiled_n) {
  auto s = detail::spec_of(c, Sm90Fp8Entry::kKGrouped, compiled_m, compiled_n, 0);
  s.kind = h::Sm90Fp8Kind::k1D1D;
  s.max_groups = kSm90KGroupedMaxGroups;
  return s;
}

// ---- rendering ----------------------------------------------------------------------------

// The impl template's arguments (the parameter lists above; trailing defaults left out).
inline std::string sm90_fp8_template_args(const Sm90Fp8KernelSpec& s) {
  TemplateArgs t;
  if (s.entry == Sm90Fp8Entry::kKGrouped) {
    t.always(s.compiled_m).always(s.compiled_n).always(s.block_m).always(s.block_n).always(s.stages);
    t.always(s.group_n).always(s.max_groups);
    return t.str();
  }
  const std::string m_boxes = s.m_boxes == Sm90MBoxes::kFitM   ? "deep_gemm::sm90::MBoxes::kFitM"
                              : s.m_boxes == Sm90MBoxes::kTail ? "deep_gemm::sm90::MBoxes::kTail"
                                                               : "deep_gemm::sm90::MBoxes::kBlock";
  t.always(s.compiled_m).always(s.compiled_n).always(s.compiled_k).always(s.block_m).always(s.block_n);
  t.always(s.stages).always(s.cluster).always(s.group_n);
  if (s.kind == h::Sm90Fp8Kind::k1D2D) {
    t.always_bool(s.mma_overlap);
    t.trailing(std::string("deep_gemm::GemmType::") + sm90_grouped_type_name(s.gemm_type), s.gemm_type == 0);
    t.trailing_bool(s.sfa_from_global, false).trailing_bool(s.dynamic_tiles, false);
  }
  t.trailing(m_boxes, s.m_boxes == Sm90MBoxes::kBlock);
  if (s.kind == h::Sm90Fp8Kind::k1D1D) {
    t.trailing("__nv_bfloat16", !s.bf16_out);
  } else {
    const auto u = [](uint32_t v) { return std::to_string(v) + "u"; };
    t.trailing(s.head_left > 0 ? "deep_gemm::epilogue::SkipHeadMid<" + u(s.head_left) + ", " + u(s.head_mid) + ", " +
                                     u(s.head_right) + ">"
                               : std::string("deep_gemm::epilogue::IdentityColumns"),
               s.head_left == 0);
    t.trailing_bool(s.evict_first_b, false);
  }
  return t.str();
}

// A short, unique kernel name for caches and logs; also the entry symbol, so profilers and
// deep_gemm.testing.bench_kineto tell kernels apart.
inline std::string sm90_fp8_kernel_name(const Sm90Fp8KernelSpec& s) {
  const auto u = [](uint32_t v) { return std::to_string(v); };
  const std::string trace = s.trace_tiles ? "_trace" : "";
  switch (s.entry) {
    case Sm90Fp8Entry::kKGrouped:
      return "sm90_fp8_gemm_1d1d_kg_m" + u(s.compiled_m) + "n" + u(s.compiled_n) + "_b" + u(s.block_m) + "x" +
             u(s.block_n) + "_s" + u(s.stages) + "_g" + u(s.group_n) + "_x" + u(s.max_groups);
    case Sm90Fp8Entry::kMGrouped: {
      static const char* tags[] = {"", "mgc", "mgm", "mgp"};
      const int t = s.gemm_type >= 1 && s.gemm_type <= 3 ? s.gemm_type : 0;
      return std::string("sm90_fp8_gemm_1d2d_") + tags[t] + "_m" + u(s.compiled_m) + "n" + u(s.compiled_n) + "k" +
             u(s.compiled_k) + "_b" + u(s.block_m) + "x" + u(s.block_n) + "_s" + u(s.stages) + "_g" + u(s.group_n) +
             (s.mma_overlap ? "_o" : "") + (s.dynamic_tiles ? "_dt" : "") + trace;
    }
    case Sm90Fp8Entry::kDense: break;
  }
  return std::string(s.kind == h::Sm90Fp8Kind::k1D1D ? "sm90_fp8_gemm_1d1d" : "sm90_fp8_gemm_1d2d") + "_m" +
         u(s.compiled_m) + "n" + u(s.compiled_n) + "k" + u(s.compiled_k) + "_b" + u(s.block_m) + "x" + u(s.block_n) +
         "_s" + u(s.stages) + "_c" + u(s.cluster) + "_g" + u(s.group_n) +
         (s.m_boxes == Sm90MBoxes::kFitM ? "_fm" : "") + (s.m_boxes == Sm90MBoxes::kTail ? "_tm" : "") +
         (s.mma_overlap ? "_o" : "") + (s.sfa_from_global ? "_sg" : "") + (s.bf16_out ? "_bf16" : "") +
         (s.head_left > 0 ? "_shm" + u(s.head_left) + "x" + u(s.head_mid) + "x" + u(s.head_right) : "") +
         (s.evict_first_b ? "_efb" : "") + trace;
}

namespace detail {

// An entry's parameter list (without the tile-trace buffer) and the impl call's arguments.
struct Sm90Fp8EntrySignature {
  std::string params, args;
};

inline Sm90Fp8EntrySignature sm90_fp8_entry_signature(const Sm90Fp8KernelSpec& s) {
  constexpr const char* kMapsAB =
      "         const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,\n";
  if (s.entry == Sm90Fp8Entry::kKGrouped) {
    const std::string cap = std::to_string(s.max_groups);
    return {"uint32_t m, uint32_t n, const float* c, float* d,\n"
            "         const __grid_constant__ CUtensorMap tmap_sfa, const __grid_constant__ CUtensorMap tmap_sfb,\n"
            "         const __grid_constant__ deep_gemm::KGroupedArgs<" + cap + "> args",
            "m, n, c, d, &tmap_sfa, &tmap_sfb, args"};
  }
  if (s.entry == Sm90Fp8Entry::kMGrouped) {
    return {std::string("uint32_t m, uint32_t n, uint32_t k, const float* sfb, const int* grouped_layout,\n"
                        "         uint32_t num_groups, uint32_t align_m, __nv_bfloat16* d, uint32_t ld_d,\n"
                        "         uint64_t d_group_stride,\n") +
                kMapsAB +
                "         const __grid_constant__ CUtensorMap tmap_sfa, const __grid_constant__ CUtensorMap tmap_d" +
                (s.dynamic_tiles ? ",\n         int* tile_counter" : ""),
            std::string("\n        m, n, k, sfb, &tmap_a, &tmap_b, &tmap_sfa, &tmap_d, grouped_layout, num_groups, "
                        "align_m, d, ld_d, {}, ") +
                (s.dynamic_tiles ? "tile_counter" : "nullptr") + ", nullptr, nullptr, d_group_stride"};
  }
  // Dense. Tail boxes: the last m-block's tensor maps, after the others.
  const bool tail = s.m_boxes == Sm90MBoxes::kTail;
  const bool tail_sfa = tail && !s.sfa_from_global;
  const std::string tail_params =
      std::string(tail ? ",\n         const __grid_constant__ CUtensorMap tmap_a_tail" : "") +
      (tail_sfa ? ", const __grid_constant__ CUtensorMap tmap_sfa_tail" : "");
  const std::string tail_args = tail ? std::string(", &tmap_a_tail, ") + (tail_sfa ? "&tmap_sfa_tail" : "nullptr") : "";
  if (s.kind == h::Sm90Fp8Kind::k1D1D)
    return {std::string("uint32_t m, uint32_t n, uint32_t k, const float* c, ") +
                (s.bf16_out ? "__nv_bfloat16* d" : "float* d") + ", uint32_t ld_d,\n" + kMapsAB +
                "         const __grid_constant__ CUtensorMap tmap_sfa, const __grid_constant__ CUtensorMap tmap_sfb" +
                tail_params,
            "\n        m, n, k, c, d, ld_d, &tmap_a, &tmap_b, &tmap_sfa, &tmap_sfb" + tail_args};
  if (s.sfa_from_global)
    return {std::string("uint32_t m, uint32_t n, uint32_t k, const float* sfb,\n"
                        "         const float* sfa, uint32_t sfa_stride_m, uint32_t sfa_stride_k,\n") +
                kMapsAB + "         const __grid_constant__ CUtensorMap tmap_d" + tail_params,
            "\n        m, n, k, sfb, &tmap_a, &tmap_b, nullptr, &tmap_d, nullptr, 1, 1, nullptr, 0,\n"
            "        {sfa, sfa_stride_m, sfa_stride_k}" +
                (tail ? ", nullptr" + tail_args : "")};
  return {std::string("uint32_t m, uint32_t n, uint32_t k, const float* sfb,\n") + kMapsAB +
              "         const __grid_constant__ CUtensorMap tmap_sfa, const __grid_constant__ CUtensorMap tmap_d" +
              tail_params,
          "\n        m, n, k, sfb, &tmap_a, &tmap_b, &tmap_sfa, &tmap_d" +
              (tail ? ", nullptr, 1, 1, nullptr, 0, {}, nullptr" + tail_args : "")};
}

}  // namespace detail

// The JIT source of a kernel: its entry (named sm90_fp8_kernel_name) instantiates the impl.
inline std::string sm90_fp8_kernel_source(const Sm90Fp8KernelSpec& s) {
  const std::string impl = s.entry == Sm90Fp8Entry::kKGrouped   ? "sm90_fp8_k_grouped"
                           : s.kind == h::Sm90Fp8Kind::k1D1D ? "sm90_fp8_gemm_1d1d"
                                                             : "sm90_fp8_gemm_1d2d";
  const auto sig = detail::sm90_fp8_entry_signature(s);
  std::string code = smem_bytes_define(s.smem_bytes) + (s.trace_tiles ? "#define DG_TRACE_TILES 1\n" : "");
  code += "#include <deep_gemm/impls/" + impl + ".cuh>\n\n";
  // The bound is always 384 threads: a fixed register cap at entry (168) that the
  // setmaxnreg pair then redistributes; block_m 64 kernels launch 256 of them.
  code += "extern \"C\" __global__ void __launch_bounds__(384, 1)\n";
  // A tile trace: the stamp buffer comes last, and the body first publishes it.
  code += sm90_fp8_kernel_name(s) + "(" + sig.params +
          (s.trace_tiles
               ? ", unsigned long long* trace_tiles_buf) {\n    deep_gemm::sm90::g_trace_tiles = trace_tiles_buf;\n"
               : ") {\n");
  code += "    deep_gemm::" + impl + "_impl<" + sm90_fp8_template_args(s) + ">(" + sig.args + ");\n}\n";
  return code;
}

// ---- tensor maps ------------------------------------------------------------------------

// Rows of A and SFA that exist, as the boxes cover them: A rounded up to 8, SFA to 4. Of
// the whole GEMM (cfg.fit_m), or of its last m-block (cfg.tail_m). Mirror box_rows and
// tail_box_rows in cuda/deep_gemm/common/sm90_fp8_core.cuh, whose comment says why.
inline std::pair<uint32_t, uint32_t> sm90_fp8_fit_box_rows(int rows) {
  return {static_cast<uint32_t>(h::sm90_align(rows, 8)), static_cast<uint32_t>(h::sm90_align(rows, 4))};
}
inline std::pair<uint32_t, uint32_t> sm90_fp8_tail_box_rows(const h::Sm90Fp8GemmConfig& c, int m) {
  return sm90_fp8_fit_box_rows(m - (h::sm90_ceil_div(m, c.block_m) - 1) * c.block_m);
}

// The tensor maps of a dense launch, in kernel-argument order (after the scalar arguments).
// Pitches: lda/ldb in bytes (k for packed), ld_d in elements (n for packed).
// d_cols: D's width where it differs from n (skip-head-mid: n + n / (left + right) * mid).
inline std::vector<Sm90TensorMapSpec> sm90_fp8_gemm_tensor_maps(const h::Sm90Fp8GemmConfig& c, int m, int n, int k,
                                                                uint64_t lda_bytes, uint64_t ldb_bytes, uint64_t ld_d,
                                                                uint64_t d_cols = 0) {
  const uint64_t kb = static_cast<uint64_t>(h::sm90_ceil_div(k, 128));
  const uint64_t m_pad = static_cast<uint64_t>(h::sm90_align(m, 4));
  const uint64_t n_pad = static_cast<uint64_t>(h::sm90_align(n, 4));
  const auto [a_rows, sfa_rows] =
      c.fit_m ? sm90_fp8_fit_box_rows(m) : std::pair<uint32_t, uint32_t>(c.block_m / c.cluster, c.block_m);
  std::vector<Sm90TensorMapSpec> maps;
  maps.push_back(
      {"a", Sm90TmaDtype::kU8, static_cast<uint64_t>(k), static_cast<uint64_t>(m), lda_bytes, 128, a_rows, 128});
  maps.push_back({"b", Sm90TmaDtype::kU8, static_cast<uint64_t>(k), static_cast<uint64_t>(n), ldb_bytes, 128,
                  static_cast<uint32_t>(c.block_n), 128});
  if (!c.sfa_from_global) maps.push_back({"sfa", Sm90TmaDtype::kF32, m_pad, kb, m_pad * 4, sfa_rows, 1, 0});
  if (c.kind == h::Sm90Fp8Kind::k1D1D) {
    maps.push_back({"sfb", Sm90TmaDtype::kF32, n_pad, kb, n_pad * 4, static_cast<uint32_t>(c.block_n), 1, 0});
  } else {
    maps.push_back({"d", Sm90TmaDtype::kBF16, d_cols != 0 ? d_cols : static_cast<uint64_t>(n),
                    static_cast<uint64_t>(m), ld_d * 2, static_cast<uint32_t>(c.swizzle_d / 2), 64, c.swizzle_d});
  }
  if (c.tail_m) {
    const auto [tail_a, tail_sfa] = sm90_fp8_tail_box_rows(c, m);
    maps.push_back(
        {"a", Sm90TmaDtype::kU8, static_cast<uint64_t>(k), static_cast<uint64_t>(m), lda_bytes, 128, tail_a, 128});
    if (!c.sfa_from_global) maps.push_back({"sfa", Sm90TmaDtype::kF32, m_pad, kb, m_pad * 4, tail_sfa, 1, 0});
  }
  return maps;
}

// Tensor maps of an m-grouped launch, in argument order (a, b, sfa, d).
//   rows: rows of A and D (M_sum, or max_m for masked)
//   sfa_blocks: outer extent of SFA seen as [sfa_blocks][align(rows, 4)] (ceil(k/128), or G
//   times that for masked).
//   masked: A and D are rank-3 maps [G][rows][.] whose groups lie a_group_bytes and
//   d_group_elems apart (each a multiple of 16 bytes), so the groups may be interleaved with
//   each other's rows (fp8_einsum's heads); the kernel addresses them by (row, group).
inline std::vector<Sm90TensorMapSpec> sm90_fp8_grouped_tensor_maps(const h::Sm90Fp8GemmConfig& c, uint64_t rows, int n,
                                                                   int k, int num_groups, uint64_t sfa_blocks,
                                                                   uint64_t lda_bytes, uint64_t ldb_bytes, uint64_t ld_d,
                                                                   bool masked = false, uint64_t a_group_bytes = 0,
                                                                   uint64_t d_group_elems = 0) {
  const uint64_t sfa_pad = (rows + 3) / 4 * 4;
  const uint64_t batch = masked ? static_cast<uint64_t>(num_groups) : 0;
  std::vector<Sm90TensorMapSpec> maps;
  maps.push_back({"a", Sm90TmaDtype::kU8, static_cast<uint64_t>(k), rows, lda_bytes, 128,
                  static_cast<uint32_t>(c.block_m), 128, batch, a_group_bytes});
  maps.push_back({"b", Sm90TmaDtype::kU8, static_cast<uint64_t>(k),
                  static_cast<uint64_t>(n) * static_cast<uint64_t>(num_groups), ldb_bytes, 128,
                  static_cast<uint32_t>(c.block_n), 128});
  maps.push_back({"sfa", Sm90TmaDtype::kF32, sfa_pad, sfa_blocks, sfa_pad * 4, static_cast<uint32_t>(c.block_m), 1, 0});
  maps.push_back({"d", Sm90TmaDtype::kBF16, static_cast<uint64_t>(n), rows, ld_d * 2,
                  static_cast<uint32_t>(c.swizzle_d / 2), 64, c.swizzle_d, batch, d_group_elems * 2});
  return maps;
}

// The per-call scale maps of a k-grouped launch (SFA, SFB) in kernel-argument order:
// MN-major fp32 [sum_kb, align(mn, 4)], box BLOCK_M / BLOCK_N x 1.
inline std::vector<Sm90TensorMapSpec> sm90_fp8_k_grouped_sf_maps(const h::Sm90Fp8GemmConfig& c, int m, int n,
                                                                 uint64_t sum_kb) {
  const uint64_t m_pad = static_cast<uint64_t>(h::sm90_align(m, 4));
  const uint64_t n_pad = static_cast<uint64_t>(h::sm90_align(n, 4));
  const uint64_t rows = std::max<uint64_t>(sum_kb, 1);  // an all-empty call still needs a valid map
  return {{"sfa", Sm90TmaDtype::kF32, m_pad, rows, m_pad * 4, static_cast<uint32_t>(c.block_m), 1, 0},
          {"sfb", Sm90TmaDtype::kF32, n_pad, rows, n_pad * 4, static_cast<uint32_t>(c.block_n), 1, 0}};
}

// Group g's operand maps: A_g [m, k_g] and B_g [n, k_g], K-major, row pitch k_g bytes.
inline std::vector<Sm90TensorMapSpec> sm90_fp8_k_grouped_group_maps(const h::Sm90Fp8GemmConfig& c, int m, int n,
                                                                    uint64_t k_g) {
  return {{"a", Sm90TmaDtype::kU8, k_g, static_cast<uint64_t>(m), k_g, 128, static_cast<uint32_t>(c.block_m), 128},
          {"b", Sm90TmaDtype::kU8, k_g, static_cast<uint64_t>(n), k_g, 128, static_cast<uint32_t>(c.block_n), 128}};
}

}  // namespace deep_gemm::launch
