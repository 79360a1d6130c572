// Ops: m-grouped FP8 GEMMs for MoE (API.md P1), bf16 output, 1D2D scaling (SFA 1x128 per
// token, SFB 128x128 per block of each group's B). The (tensor, scale) pairs, the nn view,
// recipes and aliases are in deep_gemm/_grouped.py.
//   m_grouped_fp8_gemm_nt_contiguous: A [M_sum, K], B [G, N, K], D [M_sum, N]; grouped_layout
//     int32 [M_sum] (group per row, -1 padding) or, psum, int32 [G] (cumulative row ends).
//   m_grouped_fp8_gemm_nt_masked: A [G, max_m, K], B [G, N, K], D [G, max_m, N] (A's and
//     D's groups at any 16-byte-aligned stride); masked_m int32 [G] on the GPU.
// Neither op reads grouped_layout / masked_m on the host (no device->host sync; CUDA-graph
// safe): the scheduler reads them on the GPU.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <optional>
#include <string>

#include "../launch/sm90_fp8_grouped.hpp"
#include "op_args.hpp"
#include "../torch/sf_layout.hpp"
#include "../torch/tensor_checks.hpp"

namespace deep_gemm::ops {
namespace {

namespace h = deep_gemm::heuristics;

constexpr const char* kContigOp = "m_grouped_fp8_gemm_nt_contiguous";
constexpr const char* kMaskedOp = "m_grouped_fp8_gemm_nt_masked";

// The index tensor: int32, 1-D, `len` entries, contiguous, and on the GPU (or meta).
void check_index(const ArgChecker& chk, const Tensor& t, const char* name, int64_t len, const char* what,
                 const char* op) {
  check_arg(!t.is_cpu(), op, name, " must live on the GPU (the kernel reads it there and the host never does, so "
            "one CUDA graph serves every distribution), got a CPU tensor");
  chk.dtype({t, name}, ScalarType::Int);
  chk.dim({t, name}, 1);
  chk.size({t, name}, 0, len, what);
  check_arg(t.stride(0) == 1 || len <= 1, op, name, " must be contiguous, got strides ", stride_str(t));
}

// B [G, N, K] e4m3, SFB fp32 [G, ceil(N/128), ceil(K/128)]: dtypes and shapes.
void check_grouped_b_shapes(const ArgChecker& chk, const Tensor& b, const Tensor& sfb, int64_t g, int64_t n, int64_t k,
                            const char* op) {
  chk.dtype({b, "b"}, ScalarType::Float8_e4m3fn);
  chk.dtype({sfb, "sfb"}, ScalarType::Float);
  chk.dim({sfb, "sfb"}, 3);
  chk.size({sfb, "sfb"}, 0, g, "the number of groups, from b.shape[0]");
  chk.size({sfb, "sfb"}, 1, ceil_div(n, 128), "ceil(N / 128): one scale per 128x128 block of each group's B");
  chk.size({sfb, "sfb"}, 2, ceil_div(k, 128), "ceil(K / 128)");
  check_arg(n * g < (int64_t(1) << 31), op, "G * N must be below 2^31, got ", g, " x ", n);
}

// B's layout: K-major, its groups back to back (viewable as [G * N, K]), TMA-aligned.
void check_grouped_b_layout(const ArgChecker& chk, const Tensor& b, int64_t g, int64_t n, const char* op) {
  chk.inner_contiguous({b, "b"}, "K-major (SM90 FP8 wgmma reads K-major B; transposed layouts are not supported)");
  check_arg(g <= 1 || b.stride(0) == n * b.stride(1), op, "b's groups must be packed back to back (b.stride(0) == ",
            "N * b.stride(1)), got strides ", stride_str(b));
  chk.tma_aligned({b, "b"});
}

// The int32 in which a kernel that claims its tiles (launch::dynamic_tiles_enabled())
// counts its claims, 0 at launch: fresh per call, so concurrent streams and CUDA graph
// replays never share one. The scale layout kernel zeroes it when it runs before the GEMM
// anyway (pass `ptr` to it); otherwise a fill does.
struct TileCounter {
  std::optional<Tensor> storage;  // not built when unused (a stable Tensor allocates a handle)
  int* ptr = nullptr;
  explicit TileCounter(const Tensor& like) {
    if (!launch::dynamic_tiles_enabled()) return;
    const int64_t one = 1;
    storage = empty_on_device_of(like, &one, 1, aoti_torch_dtype_int32());
    ptr = static_cast<int*>(storage->data_ptr());
  }
  // sfa_k: what mn_major_tma_aligned_buffer returned for sfa (sfa itself: no conversion ran).
  void zero_unless_converted(const Tensor& sfa_k, const Tensor& sfa) {
    if (ptr != nullptr && sfa_k.data_ptr() == sfa.data_ptr()) torch::stable::fill_(*storage, 0.0);
  }
};

Tensor contiguous_sfb(const Tensor& sfb) { return sfb.is_contiguous() ? sfb : torch::stable::contiguous(sfb); }

void m_grouped_fp8_gemm_nt_contiguous(Tensor a, Tensor sfa, Tensor b, Tensor sfb, Tensor d, Tensor grouped_layout,
                                      std::string compiled_dims, bool use_psum_layout,
                                      std::optional<int64_t> expected_m_for_psum_layout, bool ensure_zero_padding) {
  const char* op = kContigOp;
  const ArgChecker chk(op);
  const CompiledDims cd = parse_compiled_dims(compiled_dims, op);
  chk.dim({a, "a"}, 2);
  chk.dim({b, "b"}, 3);
  chk.dim({d, "d"}, 2);
  chk.dtype({a, "a"}, ScalarType::Float8_e4m3fn);
  const int64_t m = a.size(0), k = a.size(1), g = b.size(0), n = b.size(1);
  check_arg(g > 0, op, "b must hold at least one group, got shape ", shape_str(b));
  chk.size({b, "b"}, 2, k, "K, from a.shape[1]");
  chk.size({d, "d"}, 0, m, "M_sum, from a.shape[0]");
  chk.size({d, "d"}, 1, n, "N, from b.shape[1]");
  chk.below_2_31({{"M_sum", m}, {"N", n}, {"K", k}});
  check_arg(k > 0, op, "K must be positive, got K = ", k);
  check_arg(d.scalar_type() == ScalarType::BFloat16, op, "d must be torch.bfloat16 (the grouped kernels write bf16), got ",
            dtype_name(d.scalar_type()));
  chk.dtype({sfa, "sfa"}, ScalarType::Float);
  chk.dim({sfa, "sfa"}, 2);
  chk.size({sfa, "sfa"}, 0, m, "M_sum, from a.shape[0]");
  chk.size({sfa, "sfa"}, 1, ceil_div(k, 128), "ceil(K / 128)");
  check_grouped_b_shapes(chk, b, sfb, g, n, k, op);
  const int64_t align = DeviceRuntime::get().mk_alignment_for_contiguous_layout();
  if (use_psum_layout) {
    check_index(chk, grouped_layout, "grouped_layout", g,
                "the number of groups, from b.shape[0]: with use_psum_layout=True it holds each group's end row", op);
    if (expected_m_for_psum_layout.has_value())
      check_arg(*expected_m_for_psum_layout > 0, op, "expected_m_for_psum_layout must be > 0, got ",
                *expected_m_for_psum_layout);
    if (expected_m_for_psum_layout.has_value()) chk.below_2_31({{"expected_m_for_psum_layout", *expected_m_for_psum_layout}});
  } else {
    check_arg(!expected_m_for_psum_layout.has_value(), op,
              "expected_m_for_psum_layout needs use_psum_layout=True (the index layout is costed from M_sum)");
    check_index(chk, grouped_layout, "grouped_layout", m, "M_sum, from a.shape[0]: the group index of each row", op);
    check_arg(m % align == 0, op, "M_sum (a.shape[0] = ", m, ") must be a multiple of the contiguous-layout alignment ",
              align, " (get_mk_alignment_for_contiguous_layout()): every group is padded to it with -1 rows");
  }
  const auto check_devices = [&] {
    chk.same_cuda_device({{a, "a"}, {sfa, "sfa"}, {b, "b"}, {sfb, "sfb"}, {d, "d"}, {grouped_layout, "grouped_layout"}});
  };
  if (m == 0 || n == 0) return check_devices();  // an empty d: nothing to compute, no layout rule applies

  chk.distinct_elements({{a, "a"}, {b, "b"}, {d, "d"}});
  check_grouped_b_layout(chk, b, g, n, op);
  chk.inner_contiguous({a, "a"}, "K-major (SM90 FP8 wgmma reads K-major A; transposed layouts are not supported)");
  chk.inner_contiguous({d, "d"}, "row-major");
  chk.tma_aligned({a, "a"});
  chk.tma_aligned({d, "d"});
  chk.tma_store_columns({d, "d"}, n);
  chk.no_overlap({d, "d"}, {{a, "a"}, {b, "b"}, {sfa, "sfa"}, {sfb, "sfb"}, {grouped_layout, "grouped_layout"}});
  check_devices();

  if (is_meta(d)) return;
  // The psum kernel writes only the groups' rows; upstream's contract (ensure_zero_padding)
  // is that the gap rows before each group's aligned start read zero afterwards.
  if (use_psum_layout && ensure_zero_padding) torch::stable::zero_(d);

  const auto type = use_psum_layout ? h::Sm90GroupedType::kContiguousPsum : h::Sm90GroupedType::kContiguous;
  TileCounter counter(a);
  const Tensor sfa_k = mn_major_tma_aligned_buffer(sfa, op, nullptr, counter.ptr);
  counter.zero_unless_converted(sfa_k, sfa);
  const Tensor sfb_k = contiguous_sfb(sfb);
  launch::Sm90Fp8GroupedProblem p;
  p.gemm_type = static_cast<int>(type);
  set_gemm_operands(p, m, n, k, cd, a, b, sfa_k, sfb_k, d);
  p.layout = grouped_layout.data_ptr();
  p.num_groups = static_cast<int>(g);
  // As upstream: with an expected per-group M the psum layout is costed as G groups of it,
  // otherwise the whole of M_sum as one GEMM.
  const bool per_group = use_psum_layout && expected_m_for_psum_layout.has_value();
  p.m_for_config = per_group ? static_cast<int>(*expected_m_for_psum_layout) : p.m;
  p.groups_for_config = per_group ? p.num_groups : 1;
  p.align_m = static_cast<int>(align);
  p.after_own_kernel = sfa_k.data_ptr() != sfa.data_ptr();  // our layout kernel ran just before
  p.tile_counter = counter.ptr;
  launch::Sm90Fp8GroupedLauncher::get().run(p, op);
}

void m_grouped_fp8_gemm_nt_masked(Tensor a, Tensor sfa, Tensor b, Tensor sfb, Tensor d, Tensor masked_m,
                                  int64_t expected_m, std::string compiled_dims) {
  const char* op = kMaskedOp;
  const ArgChecker chk(op);
  const CompiledDims cd = parse_compiled_dims(compiled_dims, op);
  check_arg(expected_m > 0, op, "expected_m must be > 0 (the typical valid rows per group, for the heuristic), got ",
            expected_m);
  chk.dim({a, "a"}, 3);
  chk.dim({b, "b"}, 3);
  chk.dim({d, "d"}, 3);
  chk.dtype({a, "a"}, ScalarType::Float8_e4m3fn);
  const int64_t g = a.size(0), max_m = a.size(1), k = a.size(2), n = b.size(1);
  check_arg(g > 0, op, "a must hold at least one group, got shape ", shape_str(a));
  chk.size({b, "b"}, 0, g, "the number of groups, from a.shape[0]");
  chk.size({b, "b"}, 2, k, "K, from a.shape[2]");
  chk.size({d, "d"}, 0, g, "the number of groups, from a.shape[0]");
  chk.size({d, "d"}, 1, max_m, "max_m, from a.shape[1]");
  chk.size({d, "d"}, 2, n, "N, from b.shape[1]");
  chk.below_2_31({{"max_m", max_m}, {"N", n}, {"K", k}});
  check_arg(k > 0, op, "K must be positive, got K = ", k);
  check_arg(g * max_m < (int64_t(1) << 31), op, "G * max_m must be below 2^31, got ", g, " x ", max_m);
  check_arg(d.scalar_type() == ScalarType::BFloat16, op, "d must be torch.bfloat16 (the grouped kernels write bf16), got ",
            dtype_name(d.scalar_type()));
  chk.dtype({sfa, "sfa"}, ScalarType::Float);
  chk.dim({sfa, "sfa"}, 3);
  chk.size({sfa, "sfa"}, 0, g, "the number of groups, from a.shape[0]");
  chk.size({sfa, "sfa"}, 1, max_m, "max_m, from a.shape[1]");
  chk.size({sfa, "sfa"}, 2, ceil_div(k, 128), "ceil(K / 128)");
  check_grouped_b_shapes(chk, b, sfb, g, n, k, op);
  check_index(chk, masked_m, "masked_m", g, "the number of groups, from a.shape[0]", op);
  const auto check_devices = [&] {
    chk.same_cuda_device({{a, "a"}, {sfa, "sfa"}, {b, "b"}, {sfb, "sfb"}, {d, "d"}, {masked_m, "masked_m"}});
  };
  if (max_m == 0 || n == 0) return check_devices();  // an empty d: nothing to compute, no layout rule applies

  chk.distinct_elements({{a, "a"}, {b, "b"}, {d, "d"}});
  check_grouped_b_layout(chk, b, g, n, op);
  chk.inner_contiguous({a, "a"}, "K-major (SM90 FP8 wgmma reads K-major A; transposed layouts are not supported)");
  chk.inner_contiguous({d, "d"}, "row-major");
  // a's and d's groups may lie at any (16-byte-aligned, non-overlapping) stride: the kernel
  // reads and writes them through rank-3 tensor maps (fp8_einsum interleaves its heads).
  chk.tma_aligned({a, "a"});
  chk.tma_aligned({d, "d"});
  chk.tma_store_columns({d, "d"}, n);
  chk.no_overlap({d, "d"}, {{a, "a"}, {b, "b"}, {sfa, "sfa"}, {sfb, "sfb"}, {masked_m, "masked_m"}});
  check_devices();

  if (is_meta(d)) return;

  // [G][K/128][align(max_m, 4)]; only rows < masked_m[g] are converted (read on the GPU,
  // so one CUDA graph still serves every masked_m): the GEMM stores no other rows.
  TileCounter counter(a);
  const Tensor sfa_k = mn_major_tma_aligned_buffer(sfa, op, static_cast<const int*>(masked_m.data_ptr()), counter.ptr);
  counter.zero_unless_converted(sfa_k, sfa);
  const Tensor sfb_k = contiguous_sfb(sfb);
  launch::Sm90Fp8GroupedProblem p;
  p.gemm_type = static_cast<int>(h::Sm90GroupedType::kMasked);
  set_gemm_operands(p, max_m, n, k, cd, a, b, sfa_k, sfb_k, d);
  p.layout = masked_m.data_ptr();
  p.num_groups = static_cast<int>(g);
  p.lda_bytes = group_row_pitch(a);  // fp8: elements are bytes
  p.ld_d = group_row_pitch(d);
  // A lone group's stride is arbitrary (even 0): the map gets the packed one.
  p.a_group_bytes = g > 1 ? static_cast<uint64_t>(a.stride(0)) : p.lda_bytes * max_m;
  p.d_group_elems = g > 1 ? static_cast<uint64_t>(d.stride(0)) : p.ld_d * max_m;
  p.m_for_config = static_cast<int>(std::min(expected_m, max_m));
  p.groups_for_config = p.num_groups;
  p.align_m = 1;
  p.after_own_kernel = sfa_k.data_ptr() != sfa.data_ptr();  // our layout kernel ran just before
  p.tile_counter = counter.ptr;
  launch::Sm90Fp8GroupedLauncher::get().run(p, op);
}

// Compiles (no GPU needed) the kernel a grouped op would use on a GPU with `num_sms` SMs;
// returns "<kernel name>\t<cubin path>". layout: "contiguous" (m = M_sum), "psum"
// (m = M_sum; expected_m > 0 costs it as num_groups groups of expected_m rows) or "masked"
// (m = max_m, expected_m > 0). For warmup.
std::string m_grouped_fp8_gemm_build(std::string layout, int64_t m, int64_t n, int64_t k, int64_t num_groups,
                                     int64_t expected_m, int64_t num_sms, std::string compiled_dims) {
  constexpr const char* op = "m_grouped_fp8_gemm_build";
  check_arg(layout == "contiguous" || layout == "psum" || layout == "masked", op,
            "layout must be 'contiguous', 'psum' or 'masked', got '", layout, "'");
  check_arg(m > 0 && n > 0 && k > 0, op, "need M, N, K > 0, got ", m, " x ", n, " x ", k);
  check_arg(num_groups > 0, op, "num_groups must be > 0, got ", num_groups);
  ArgChecker(op).below_2_31({{"M", m}, {"N", n}, {"K", k}, {"num_groups", num_groups}, {"expected_m", expected_m}});
  check_arg(num_sms > 0 && num_sms <= 1024, op, "num_sms must be in [1, 1024], got ", num_sms);
  const bool masked = layout == "masked";
  check_arg(!masked || expected_m > 0, op, "expected_m must be > 0 for the masked layout, got ", expected_m);
  const CompiledDims cd = parse_compiled_dims(compiled_dims, op);
  const auto [mult_m, mult_n] = DeviceRuntime::get().block_size_multiple_of();
  const int type = static_cast<int>(masked ? h::Sm90GroupedType::kMasked
                                    : layout == "psum" ? h::Sm90GroupedType::kContiguousPsum
                                                       : h::Sm90GroupedType::kContiguous);
  const bool per_group = masked || (layout == "psum" && expected_m > 0);
  const int align = masked ? 1 : DeviceRuntime::get().mk_alignment_for_contiguous_layout();
  const launch::detail::GroupedKey key{type,
                                       per_group ? int(masked ? std::min(expected_m, m) : expected_m) : int(m),
                                       per_group ? int(num_groups) : 1,
                                       int(n),
                                       int(k),
                                       cd.m ? int(m) : 0,
                                       cd.n ? int(n) : 0,
                                       cd.k ? int(k) : 0,
                                       int(num_sms),
                                       mult_m,
                                       mult_n,
                                       align,
                                       0};
  auto [cfg, src] = launch::plan_sm90_fp8_grouped(key, h::kSm90MaxSmemBytes);
  return src.name + "\t" + deep_jit::Runtime::get().build(src);
}

}  // namespace
}  // namespace deep_gemm::ops

STABLE_TORCH_LIBRARY_FRAGMENT(deep_gemm, m) {
  m.def("m_grouped_fp8_gemm_nt_contiguous(Tensor a, Tensor sfa, Tensor b, Tensor sfb, Tensor(a!) d, "
        "Tensor grouped_layout, str compiled_dims=\"nk\", bool use_psum_layout=False, "
        "int? expected_m_for_psum_layout=None, bool ensure_zero_padding=False) -> ()");
  m.def("m_grouped_fp8_gemm_nt_masked(Tensor a, Tensor sfa, Tensor b, Tensor sfb, Tensor(a!) d, Tensor masked_m, "
        "int expected_m, str compiled_dims=\"nk\") -> ()");
  m.def("m_grouped_fp8_gemm_build(str layout, int m, int n, int k, int num_groups, int expected_m, int num_sms, "
        "str compiled_dims) -> str");
}

STABLE_TORCH_LIBRARY_IMPL(deep_gemm, CompositeExplicitAutograd, m) {
  m.impl("m_grouped_fp8_gemm_nt_contiguous", TORCH_BOX(&deep_gemm::ops::m_grouped_fp8_gemm_nt_contiguous));
  m.impl("m_grouped_fp8_gemm_nt_masked", TORCH_BOX(&deep_gemm::ops::m_grouped_fp8_gemm_nt_masked));
  m.impl("m_grouped_fp8_gemm_build", TORCH_BOX(&deep_gemm::ops::m_grouped_fp8_gemm_build));
}
