// Ops: k-grouped FP8 GEMMs for MoE weight gradients (API.md P1), 1D1D scaling (SFA and
// SFB both 1x128 along K), FP32 output accumulated into c / d. The (tensor, scale) pairs,
// recipe, argument spellings and use_psum_layout are in deep_gemm/_k_grouped.py.
//   For each group g (K offset o_g = ks[0] + ... + ks[g-1]):
//     d[g] = c[g] + (A_g * SFA_g) @ (B_g * SFB_g)^T         (c None: d[g] = the product)
//   k_grouped_fp8_gemm_nt_contiguous: A flat, group g's K-major [M, k_g] at element M * o_g,
//     B likewise [N, k_g] at N * o_g.
//   k_grouped_fp8_gemm_tn_contiguous: A [sum_k, M], B [sum_k, N] (MN-major, tokens as rows).
//     SM90 wgmma reads K-major operands only, so both are first transposed on the GPU into
//     the nt layout (a temporary of sum_k * (M + N) bytes and one extra read and write of
//     each), then the nt kernel runs.
//   Scales (both forms): SFA fp32 [sum_k/128, M], SFB fp32 [sum_k/128, N]; group g's K block kb
//   is row o_g/128 + kb. Converted to the TMA-aligned layout on the GPU only when M (N) is
//   not a multiple of 4 or the strides differ.
// ks (host ints) drive the launch; ks_tensor (int32 on the GPU, upstream's grouped_layout)
// is checked for shape, dtype and device but never read: the kernel gets every group's K by
// value (so a captured CUDA graph replays the ks of its capture).
#include <torch/csrc/stable/library.h>

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "../launch/sm90_fp8_k_grouped.hpp"
#include "op_args.hpp"
#include "../torch/sf_layout.hpp"
#include "../torch/tensor_checks.hpp"

namespace deep_gemm::ops {
namespace {

namespace h = deep_gemm::heuristics;

constexpr const char* kNtOp = "k_grouped_fp8_gemm_nt_contiguous";
constexpr const char* kTnOp = "k_grouped_fp8_gemm_tn_contiguous";
// The tn form's grid is (K blocks, ceil(mn / 128)); its y extent is at most 65535.
constexpr int64_t kTnMaxMn = int64_t(65535) * 128;

bool is_contiguous_tensor(const Tensor& t) {
  if (t.numel() == 0) return true;  // no element to place
  int64_t expected = 1;
  for (int64_t i = t.dim() - 1; i >= 0; --i) {
    if (t.size(i) != 1 && t.stride(i) != expected) return false;
    expected *= t.size(i);
  }
  return true;
}

// Per-row (1x128 along K) scales of one operand: fp32 [sum_k/128, mn].
void check_k_grouped_sf(const ArgChecker& chk, const Tensor& sf, const char* name, int64_t sum_kb, int64_t mn,
                        const char* mn_name) {
  chk.dtype({sf, name}, ScalarType::Float);
  chk.dim({sf, name}, 2);
  chk.size({sf, name}, 0, sum_kb, "sum(ks) / 128: one row per 128-wide K block of every group, back to back");
  chk.size({sf, name}, 1, mn, mn_name);
}

// The kernel's scale layout [sum_kb, align(mn, 4)] (MN-major, TMA-aligned): `sf` itself when
// it has it, else a converted copy. Returns the storage base.
const float* k_grouped_sf_base(const Tensor& sf, const char* op, std::vector<Tensor>& keep) {
  if (sf.numel() == 0) return nullptr;
  // As [mn, sum_kb] (the layout helper's orientation), the required strides are (1, pad).
  keep.push_back(mn_major_tma_aligned_buffer(torch::stable::transpose(sf, 0, 1), op));
  return static_cast<const float*>(keep.back().data_ptr());
}

void log_tn_cost_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (deep_jit::detail::env_flag("DG_JIT_DEBUG"))
      std::fprintf(stderr,
                   "deep_gemm: k_grouped_fp8_gemm_tn_contiguous: SM90 FP8 wgmma reads K-major operands only; A "
                   "[sum_k, M] and B [sum_k, N] are transposed on the GPU into per-group K-major copies (one extra "
                   "read and write of both, sum_k * (M + N) bytes of temporary memory) before the nt kernel runs\n");
  });
}

void k_grouped(bool tn, Tensor a, Tensor sfa, Tensor b, Tensor sfb, Tensor d, std::vector<int64_t> ks,
               Tensor ks_tensor, std::optional<Tensor> c, std::string compiled_dims) {
  const char* op = tn ? kTnOp : kNtOp;
  const ArgChecker chk(op);
  const CompiledDims cd = parse_compiled_dims(compiled_dims, op);
  chk.dim({d, "d"}, 3);
  check_arg(d.scalar_type() == ScalarType::Float, op,
            "d must be torch.float32 (the k-grouped kernel accumulates in FP32), got ", dtype_name(d.scalar_type()));
  const int64_t g = d.size(0), m = d.size(1), n = d.size(2);
  check_arg(static_cast<int64_t>(ks.size()) == g, op, "ks has ", ks.size(),
            " entries but d.shape[0] (the number of groups) is ", g, "; d is ", shape_str(d));
  int64_t sum_k = 0;
  for (size_t i = 0; i < ks.size(); ++i) {
    check_arg(ks[i] >= 0 && ks[i] % 128 == 0, op, "ks[", i, "] must be a non-negative multiple of 128 (SM90 K block), ",
              "got ", ks[i]);
    check_arg(ks[i] < (int64_t(1) << 31), op, "ks[", i, "] must be below 2^31, got ", ks[i]);
    sum_k += ks[i];
  }
  const int64_t sum_kb = sum_k / 128;
  check_arg(sum_kb < (int64_t(1) << 31), op, "sum(ks) / 128 must be below 2^31, got ", sum_kb);
  chk.below_2_31({{"M", m}, {"N", n}});
  int64_t sum_k_m = 0, sum_k_n = 0;  // a's and b's element counts; checked: they are compared with numel() below
  check_arg(!__builtin_mul_overflow(sum_k, m, &sum_k_m) && !__builtin_mul_overflow(sum_k, n, &sum_k_n), op,
            "sum(ks) * M and sum(ks) * N must fit in 64 bits, got sum(ks) = ", sum_k, ", M = ", m, ", N = ", n);
  check_arg(n % 2 == 0, op, "N (d.shape[2]) must be even (the FP32 epilogue stores column pairs), got ", n);
  if (tn)
    check_arg(m <= kTnMaxMn && n <= kTnMaxMn, op, "M and N must be at most ", kTnMaxMn,
              " for the tn layout kernel, got ", m, " x ", n);

  // grouped_layout / ks_tensor: int32 [G] on the GPU, contiguous.
  check_arg(!ks_tensor.is_cpu(), op, "ks_tensor (grouped_layout) must live on the GPU like the operands, got a CPU ",
            "tensor (its values are not read: ks gives the host the group sizes)");
  chk.dtype({ks_tensor, "ks_tensor"}, ScalarType::Int);
  chk.dim({ks_tensor, "ks_tensor"}, 1);
  chk.size({ks_tensor, "ks_tensor"}, 0, g, "the number of groups, from d.shape[0] and len(ks)");
  check_arg(ks_tensor.stride(0) == 1 || g <= 1, op, "ks_tensor must be contiguous, got strides ", stride_str(ks_tensor));

  chk.dtype({a, "a"}, ScalarType::Float8_e4m3fn);
  chk.dtype({b, "b"}, ScalarType::Float8_e4m3fn);
  if (tn) {
    chk.dim({a, "a"}, 2);
    chk.dim({b, "b"}, 2);
    chk.size({a, "a"}, 0, sum_k, "sum(ks): every group's tokens back to back");
    chk.size({a, "a"}, 1, m, "M, from d.shape[1]");
    chk.size({b, "b"}, 0, sum_k, "sum(ks): every group's tokens back to back");
    chk.size({b, "b"}, 1, n, "N, from d.shape[2]");
  } else {
    check_arg(a.numel() == sum_k_m, op, "a must hold sum(ks) * M = ", sum_k, " * ", m, " = ", sum_k_m,
              " elements (each group's K-major [M, k_g] matrix back to back), got shape ", shape_str(a));
    check_arg(b.numel() == sum_k_n, op, "b must hold sum(ks) * N = ", sum_k, " * ", n, " = ", sum_k_n,
              " elements (each group's K-major [N, k_g] matrix back to back), got shape ", shape_str(b));
  }
  check_k_grouped_sf(chk, sfa, "sfa", sum_kb, m, "M, from d.shape[1]");
  check_k_grouped_sf(chk, sfb, "sfb", sum_kb, n, "N, from d.shape[2]");
  if (c.has_value()) {
    chk.dtype({*c, "c"}, ScalarType::Float);
    chk.dim({*c, "c"}, 3);
    chk.size({*c, "c"}, 0, g, "the number of groups, from d.shape[0]");
    chk.size({*c, "c"}, 1, m, "M, from d.shape[1]");
    chk.size({*c, "c"}, 2, n, "N, from d.shape[2]");
  }
  const auto check_devices = [&] {
    chk.same_cuda_device({{a, "a"}, {sfa, "sfa"}, {b, "b"}, {sfb, "sfb"}, {d, "d"}, {ks_tensor, "ks_tensor"}});
    if (c.has_value()) chk.same_cuda_device({{d, "d"}, {*c, "c"}});
  };
  if (g == 0 || m == 0 || n == 0) return check_devices();  // an empty d: nothing to write, no layout rule applies

  if (tn) {
    check_arg(is_contiguous_tensor(a), op, "a must be contiguous (row-major [sum_k, M]), got strides ", stride_str(a));
    check_arg(is_contiguous_tensor(b), op, "b must be contiguous (row-major [sum_k, N]), got strides ", stride_str(b));
  } else {
    check_arg(is_contiguous_tensor(a), op, "a must be contiguous (the groups' [M, k_g] matrices packed), got shape ",
              shape_str(a), " with strides ", stride_str(a));
    check_arg(is_contiguous_tensor(b), op, "b must be contiguous (the groups' [N, k_g] matrices packed), got shape ",
              shape_str(b), " with strides ", stride_str(b));
  }
  check_arg(is_contiguous_tensor(d), op, "d must be contiguous [G, M, N], got strides ", stride_str(d));
  if (c.has_value())
    check_arg(is_contiguous_tensor(*c), op, "c must be contiguous [G, M, N] like d, got strides ", stride_str(*c));
  if (!is_meta(a) && !is_meta(b) && a.numel() > 0 && b.numel() > 0) {
    check_arg(reinterpret_cast<uintptr_t>(a.data_ptr()) % 16 == 0, op, "a's data pointer must be 16-byte aligned ",
              "for TMA (a sliced view may break this)");
    check_arg(reinterpret_cast<uintptr_t>(b.data_ptr()) % 16 == 0, op, "b's data pointer must be 16-byte aligned ",
              "for TMA (a sliced view may break this)");
  }
  chk.no_overlap({d, "d"}, {{a, "a"}, {b, "b"}, {sfa, "sfa"}, {sfb, "sfb"}, {ks_tensor, "ks_tensor"}});
  if (c.has_value() && c->data_ptr() != d.data_ptr()) chk.no_overlap({d, "d"}, {{*c, "c"}});
  check_devices();

  if (is_meta(d)) return;  // shape-only run

  std::vector<Tensor> keep;  // converted scales and tn copies live until the launches are queued
  const float* sfa_base = k_grouped_sf_base(sfa, op, keep);
  const float* sfb_base = k_grouped_sf_base(sfb, op, keep);

  const auto* a_nt = static_cast<const uint8_t*>(a.data_ptr());
  const auto* b_nt = static_cast<const uint8_t*>(b.data_ptr());
  if (tn && sum_k > 0) {
    log_tn_cost_once();
    for (int which = 0; which < 2; ++which) {
      const Tensor& src = which == 0 ? a : b;
      const int64_t mn = which == 0 ? m : n;
      keep.push_back(torch::stable::new_empty(src, {sum_k * mn}));
      launch::KGroupedTransposeProblem tp;
      tp.in = static_cast<const uint8_t*>(src.data_ptr());
      tp.out = static_cast<uint8_t*>(keep.back().data_ptr());
      tp.mn = mn;
      tp.ks = &ks;
      tp.device = d.get_device_index();
      launch::KGroupedTransposeLauncher::get().run(tp);
      (which == 0 ? a_nt : b_nt) = tp.out;
    }
  }

  launch::Sm90KGroupedProblem p;
  p.m = static_cast<int>(m);
  p.n = static_cast<int>(n);
  p.compiled_m = cd.m ? p.m : 0;
  p.compiled_n = cd.n ? p.n : 0;
  p.device = d.get_device_index();
  p.ks = &ks;
  p.a = a_nt;
  p.b = b_nt;
  p.sfa = sfa_base;
  p.sfb = sfb_base;
  p.c = c.has_value() ? static_cast<const float*>(c->data_ptr()) : nullptr;
  p.d = static_cast<float*>(d.data_ptr());
  launch::Sm90KGroupedLauncher::get().run(p, op);
}

void k_grouped_fp8_gemm_nt_contiguous(Tensor a, Tensor sfa, Tensor b, Tensor sfb, Tensor d, std::vector<int64_t> ks,
                                      Tensor ks_tensor, std::optional<Tensor> c, std::string compiled_dims) {
  k_grouped(false, a, sfa, b, sfb, d, std::move(ks), ks_tensor, c, std::move(compiled_dims));
}

void k_grouped_fp8_gemm_tn_contiguous(Tensor a, Tensor sfa, Tensor b, Tensor sfb, Tensor d, std::vector<int64_t> ks,
                                      Tensor ks_tensor, std::optional<Tensor> c, std::string compiled_dims) {
  k_grouped(true, a, sfa, b, sfb, d, std::move(ks), ks_tensor, c, std::move(compiled_dims));
}

// Compiles (no GPU needed) the kernel a k-grouped op would use for `num_groups` groups of
// about k tokens on a GPU with `num_sms` SMs (one launch's worth: at most 32 groups are
// costed together); with tn also the layout kernel. Returns "<kernel name>\t<cubin path>" of
// the GEMM. For warmup.
std::string k_grouped_fp8_gemm_build(int64_t m, int64_t n, int64_t k, int64_t num_groups, int64_t num_sms,
                                     std::string compiled_dims, bool tn) {
  constexpr const char* op = "k_grouped_fp8_gemm_build";
  check_arg(m > 0 && n > 0 && k >= 0 && k % 128 == 0, op,
            "need M, N > 0 and K (per group) a non-negative multiple of 128, got ", m, " x ", n, " x ", k);
  check_arg(num_groups > 0, op, "num_groups must be > 0, got ", num_groups);
  ArgChecker(op).below_2_31({{"M", m}, {"N", n}, {"K", k}, {"num_groups", num_groups}});
  check_arg(num_sms > 0 && num_sms <= 1024, op, "num_sms must be in [1, 1024], got ", num_sms);
  const CompiledDims cd = parse_compiled_dims(compiled_dims, op);
  const auto [mult_m, mult_n] = DeviceRuntime::get().block_size_multiple_of();
  const int groups = static_cast<int>(std::min<int64_t>(num_groups, launch::kSm90KGroupedMaxGroups));
  const launch::detail::KGroupedKey key{int(m), int(n), h::sm90_k_grouped_k_bucket(k * groups, groups), groups,
                                        cd.m ? int(m) : 0, cd.n ? int(n) : 0, int(num_sms), mult_m, mult_n, 0};
  if (tn) deep_jit::Runtime::get().build(launch::KGroupedTransposeLauncher::source());
  auto [cfg, src] = launch::plan_sm90_fp8_k_grouped(key, h::kSm90MaxSmemBytes);
  return src.name + "\t" + deep_jit::Runtime::get().build(src);
}

}  // namespace
}  // namespace deep_gemm::ops

STABLE_TORCH_LIBRARY_FRAGMENT(deep_gemm, m) {
  m.def("k_grouped_fp8_gemm_nt_contiguous(Tensor a, Tensor sfa, Tensor b, Tensor sfb, Tensor(a!) d, int[] ks, "
        "Tensor ks_tensor, Tensor? c=None, str compiled_dims=\"mn\") -> ()");
  m.def("k_grouped_fp8_gemm_tn_contiguous(Tensor a, Tensor sfa, Tensor b, Tensor sfb, Tensor(a!) d, int[] ks, "
        "Tensor ks_tensor, Tensor? c=None, str compiled_dims=\"mn\") -> ()");
  m.def("k_grouped_fp8_gemm_build(int m, int n, int k, int num_groups, int num_sms, str compiled_dims, "
        "bool tn=False) -> str");
}

STABLE_TORCH_LIBRARY_IMPL(deep_gemm, CompositeExplicitAutograd, m) {
  m.impl("k_grouped_fp8_gemm_nt_contiguous", TORCH_BOX(&deep_gemm::ops::k_grouped_fp8_gemm_nt_contiguous));
  m.impl("k_grouped_fp8_gemm_tn_contiguous", TORCH_BOX(&deep_gemm::ops::k_grouped_fp8_gemm_tn_contiguous));
  m.impl("k_grouped_fp8_gemm_build", TORCH_BOX(&deep_gemm::ops::k_grouped_fp8_gemm_build));
}
