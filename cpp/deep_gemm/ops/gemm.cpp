// Ops: dense FP8 GEMM (API.md P0). One op, `fp8_gemm_nt`; the nn/tn/tt forms,
// the (tensor, scale) pairs and recipes are views and conveniences in
// deep_gemm/_C.py. Scale layouts are converted here, on the GPU, when needed. The output dtype picks the kernel:
//   d bf16  -> 1D2D: SFA 1x128 per token, SFB 128x128 per block, c must be None
//   d fp32  -> 1D1D: SFA and SFB 1x128, d = c + A @ B^T (c may be d itself)
#include <torch/csrc/stable/library.h>

#include <optional>
#include <string>
#include <vector>

#include "../launch/sm90_fp8_gemm.hpp"
#include "op_args.hpp"
#include "../torch/sf_layout.hpp"
#include "../torch/tensor_checks.hpp"

namespace deep_gemm::ops {
namespace {

constexpr const char* kNtOp = "fp8_gemm_nt";

// Per-row (1x128) scale factors: fp32 [mn, ceil(K/128)] in any layout; they
// are brought into the MN-major, TMA-aligned layout the kernels load only when
// they are not in it already (torch/sf_layout.hpp).
void check_row_sf(const ArgChecker& chk, const Tensor& sf, const char* name, int64_t mn, int64_t k_blocks) {
  chk.dtype({sf, name}, ScalarType::Float);
  chk.dim({sf, name}, 2);
  chk.size({sf, name}, 0, mn, "rows of the operand");
  chk.size({sf, name}, 1, k_blocks, "ceil(K / 128)");
}

// Head splits of fp8_gemm_nt_skip_head_mid: heads of left + right product columns, each
// written to D with `mid` columns skipped between its left and right parts (0: none).
struct HeadSplits {
  int64_t left = 0, mid = 0, right = 0;
};

// The dense FP8 GEMM behind fp8_gemm_nt and fp8_gemm_nt_skip_head_mid. The kernel: 1D1D
// (per-row SFB) for an fp32 d, or a bf16 d with sfb_per_row (upstream's recipe (1, 1, 128)
// without accumulation); 1D2D (128x128-block SFB) otherwise.
void fp8_gemm(const char* kOp, Tensor a, Tensor sfa, Tensor b, Tensor sfb, Tensor d, std::optional<Tensor> c,
              const std::string& compiled_dims, bool sfb_per_row, HeadSplits heads) {
  const ArgChecker chk(kOp);
  const CompiledDims cd = parse_compiled_dims(compiled_dims, kOp);
  chk.dim({a, "a"}, 2);
  chk.dim({b, "b"}, 2);
  chk.dim({d, "d"}, 2);
  chk.dtype({a, "a"}, ScalarType::Float8_e4m3fn);
  chk.dtype({b, "b"}, ScalarType::Float8_e4m3fn);
  const int64_t m = a.size(0), k = a.size(1), n = b.size(0);
  chk.size({b, "b"}, 1, k, "K, from a.shape[1]");
  chk.size({d, "d"}, 0, m, "M, from a.shape[0]");
  const bool skip_heads = heads.left > 0;
  int64_t d_cols = n;
  if (skip_heads) {
    const int64_t width = heads.left + heads.right;
    check_arg(n % width == 0, kOp, "N (b.shape[0] = ", n, ") must be a multiple of left + right = ", width,
              " (whole heads), head_splits = (", heads.left, ", ", heads.mid, ", ", heads.right, ")");
    d_cols = n + n / width * heads.mid;
    chk.size({d, "d"}, 1, d_cols, "N + N / (left + right) * mid: every head's left, mid and right columns");
  } else {
    chk.size({d, "d"}, 1, n, "N, from b.shape[0]");
  }
  chk.below_2_31({{"M", m}, {"N", n}, {"K", k}, {"d.shape[1]", d_cols}});
  // K need not be a multiple of 128: the last K block's TMA boxes read zeros past K.
  check_arg(k > 0, kOp, "K must be positive, got K = ", k);
  const bool fp32_d = d.scalar_type() == ScalarType::Float;
  check_arg(fp32_d || d.scalar_type() == ScalarType::BFloat16, kOp,
            "d must be torch.bfloat16 (1D2D kernel, or 1D1D without c) or torch.float32 (1D1D kernel, accumulating "
            "into c), got ", dtype_name(d.scalar_type()));
  // fp32_out: the 1D1D kernel (its launch key keeps that name); bf16_1d1d: it writes bf16.
  const bool fp32_out = fp32_d || sfb_per_row;
  const bool bf16_1d1d = fp32_out && !fp32_d;
  if (bf16_1d1d)
    check_arg(!c.has_value(), kOp, "c (accumulation) needs an fp32 d; with a bf16 d the 1D1D kernel (recipe (1, 1, 128)) "
              "writes A @ B^T alone");
  if (skip_heads) check_arg(!fp32_out, kOp, "skip-head-mid runs the 1D2D kernel (bf16 d, 128x128-block SFB)");
  const int64_t k_blocks = ceil_div(k, 128);
  check_row_sf(chk, sfa, "sfa", m, k_blocks);
  if (fp32_out) {
    check_row_sf(chk, sfb, "sfb", n, k_blocks);
  } else {
    check_arg(!c.has_value(), kOp, "c (accumulation) needs an fp32 d and 1x128 scales for B (recipe (1, 1, 128)); "
              "d is torch.bfloat16");
    chk.dtype({sfb, "sfb"}, ScalarType::Float);
    chk.dim({sfb, "sfb"}, 2);
    chk.size({sfb, "sfb"}, 0, ceil_div(n, 128), "ceil(N / 128): one scale per 128x128 block of B");
    chk.size({sfb, "sfb"}, 1, k_blocks, "ceil(K / 128)");
  }
  if (c.has_value()) {
    chk.dtype({*c, "c"}, ScalarType::Float);
    chk.dim({*c, "c"}, 2);
    chk.size({*c, "c"}, 0, m, "M");
    chk.size({*c, "c"}, 1, n, "N");
  }
  const auto check_devices = [&] {
    chk.same_cuda_device({{a, "a"}, {sfa, "sfa"}, {b, "b"}, {sfb, "sfb"}, {d, "d"}});
    if (c.has_value()) chk.same_cuda_device({{a, "a"}, {*c, "c"}});
  };
  if (m == 0 || n == 0) return check_devices();  // an empty d: nothing to compute, no layout rule applies

  chk.distinct_elements({{a, "a"}, {b, "b"}, {d, "d"}});
  if (c.has_value()) {
    chk.distinct_elements({*c, "c"});
    check_arg((c->stride(1) == 1 || n == 1) && (c->stride(0) == d.stride(0) || m == 1), kOp,
              "c must have d's layout (row-major, row stride ", d.stride(0), "), got strides ", stride_str(*c));
  }
  chk.inner_contiguous({a, "a"}, "K-major (SM90 FP8 wgmma reads K-major A; transposed layouts are not supported)");
  chk.inner_contiguous({b, "b"}, "K-major (SM90 FP8 wgmma reads K-major B; transposed layouts are not supported)");
  chk.inner_contiguous({d, "d"}, "row-major");
  chk.tma_aligned({a, "a"});
  chk.tma_aligned({b, "b"});
  chk.tma_aligned({d, "d"});
  if (fp32_out) {
    // The 1D1D kernel stores column pairs with a 32-bit row pitch (one row: tma_row_pitch's).
    check_arg(m == 1 || d.stride(0) % 2 == 0, kOp, "d's row stride must be even for the 1D1D kernel, got ", d.stride(0));
    if (m > 1) chk.below_2_31({{"d.stride(0)", d.stride(0)}});
  } else {
    chk.tma_store_columns({d, "d"}, d_cols);
  }
  chk.no_overlap({d, "d"}, {{a, "a"}, {b, "b"}, {sfa, "sfa"}, {sfb, "sfb"}});
  if (c.has_value() && c->data_ptr() != d.data_ptr()) chk.no_overlap({d, "d"}, {{*c, "c"}});
  check_devices();

  if (is_meta(d)) return;  // shape-only run

  const Tensor sfb_k = fp32_out ? mn_major_tma_aligned_buffer(sfb, kOp) : (sfb.is_contiguous() ? sfb : torch::stable::contiguous(sfb));
  launch::Sm90Fp8Problem p;
  p.fp32_out = fp32_out;
  p.bf16_1d1d = bf16_1d1d;
  p.head_left = static_cast<int>(heads.left);
  p.head_mid = static_cast<int>(heads.mid);
  p.head_right = static_cast<int>(heads.right);
  p.d_cols = static_cast<uint64_t>(d_cols);
  set_gemm_operands(p, m, n, k, cd, a, b, sfa, sfb_k, d);
  p.c = c.has_value() ? c->data_ptr() : nullptr;
  // Per-token scales not in the TMA layout: the bf16 kernel may read them as given
  // (small M, see heuristics::sm90_fp8_sfa_from_global_fits); otherwise they are converted
  // into fresh storage by our layout kernel (a no-op when the caller prepared them).
  const bool sfa_prepared = is_mn_major_tma_aligned(sfa);
  // The kernel indexes as-given scales with 32-bit strides and offsets: only where every
  // offset fits (the scales' extent below 2^31 elements).
  p.sfa_from_global = !fp32_out && !sfa_prepared &&
                      (m - 1) * sfa.stride(0) + (k_blocks - 1) * sfa.stride(1) < (int64_t(1) << 31);
  p.sfa_stride_m = static_cast<uint32_t>(sfa.stride(0));
  p.sfa_stride_k = static_cast<uint32_t>(sfa.stride(1));
  auto& launcher = launch::Sm90Fp8GemmLauncher::get();
  const auto& entry = launcher.prepare(p);
  Tensor sfa_k = sfa;  // keeps converted storage alive until the launch is enqueued
  if (!sfa_prepared && !entry.cfg.sfa_from_global) {
    sfa_k = mn_major_tma_aligned_storage(sfa, kOp);
    p.sfa = sfa_k.data_ptr();
  }
  // A converted scale tensor is new storage, written by our layout kernel just before.
  p.after_own_kernel = sfa_k.data_ptr() != sfa.data_ptr() || (fp32_out && sfb_k.data_ptr() != sfb.data_ptr());
  launcher.launch(entry, p);
}

void fp8_gemm_nt(Tensor a, Tensor sfa, Tensor b, Tensor sfb, Tensor d, std::optional<Tensor> c, std::string compiled_dims,
                 bool sfb_per_row) {
  fp8_gemm(kNtOp, a, sfa, b, sfb, d, c, compiled_dims, sfb_per_row, {});
}

// D = A @ B^T with each head of left + right product columns written as [left | mid columns
// left untouched | right] (DeepSeek's attention: the GEMM skips the rope part of a head).
void fp8_gemm_nt_skip_head_mid(Tensor a, Tensor sfa, Tensor b, Tensor sfb, Tensor d, std::vector<int64_t> head_splits,
                               std::string compiled_dims) {
  constexpr const char* op = "fp8_gemm_nt_skip_head_mid";
  check_arg(head_splits.size() == 3, op, "head_splits must be (left, mid, right), got ", head_splits.size(), " values");
  const HeadSplits heads{head_splits[0], head_splits[1], head_splits[2]};
  // The epilogue remaps whole 16-column staging atoms (the smallest TMA swizzle), so the
  // seams of a head fall on multiples of 16.
  check_arg(heads.left > 0 && heads.right > 0 && heads.mid >= 0 && heads.left % 16 == 0 && heads.right % 16 == 0 &&
                heads.mid % 8 == 0 && heads.left + heads.mid + heads.right < (int64_t(1) << 20),
            op, "head_splits = (left, mid, right) needs left and right positive multiples of 16 and mid a multiple of 8 "
            "(>= 0), got (", heads.left, ", ", heads.mid, ", ", heads.right, ")");
  fp8_gemm(op, a, sfa, b, sfb, d, std::nullopt, compiled_dims, false, heads);
}

// Compiles (no GPU needed) the kernels fp8_gemm_nt would use for this shape on a GPU with
// `num_sms` SMs: one line "<kernel name>\t<cubin path>" for prepared scales, and a second
// where per-token scales given as is take their own kernel (small M). For warmup.
std::string fp8_gemm_build(int64_t m, int64_t n, int64_t k, bool fp32_out, int64_t num_sms, std::string compiled_dims) {
  constexpr const char* op = "fp8_gemm_build";
  check_arg(m > 0 && n > 0 && k > 0, op, "need M, N, K > 0, got ", m, " x ", n, " x ", k);
  ArgChecker(op).below_2_31({{"M", m}, {"N", n}, {"K", k}});
  check_arg(num_sms > 0 && num_sms <= 1024, op, "num_sms must be in [1, 1024], got ", num_sms);
  const CompiledDims cd = parse_compiled_dims(compiled_dims, op);
  const auto [mult_m, mult_n] = DeviceRuntime::get().block_size_multiple_of();
  const launch::detail::ConfigKey key{fp32_out, int(m), int(n), int(k), cd.m ? int(m) : 0, cd.n ? int(n) : 0,
                                      cd.k ? int(k) : 0, int(num_sms), mult_m, mult_n, 0};
  auto [cfg, src] = launch::plan_sm90_fp8_gemm(key, heuristics::kSm90MaxSmemBytes);
  std::string built = src.name + "\t" + deep_jit::Runtime::get().build(src);
  // Per-token scales not in the TMA layout take another kernel at small M: build it too.
  launch::detail::ConfigKey key_as_given = key;
  key_as_given.sfa_from_global = !fp32_out;
  auto [cfg_g, src_g] = launch::plan_sm90_fp8_gemm(key_as_given, heuristics::kSm90MaxSmemBytes);
  if (cfg_g.sfa_from_global) built += "\n" + src_g.name + "\t" + deep_jit::Runtime::get().build(src_g);
  return built;
}

}  // namespace
}  // namespace deep_gemm::ops

STABLE_TORCH_LIBRARY_FRAGMENT(deep_gemm, m) {
  m.def("fp8_gemm_nt(Tensor a, Tensor sfa, Tensor b, Tensor sfb, Tensor(a!) d, Tensor? c=None, "
        "str compiled_dims=\"nk\", bool sfb_per_row=False) -> ()");
  m.def("fp8_gemm_nt_skip_head_mid(Tensor a, Tensor sfa, Tensor b, Tensor sfb, Tensor(a!) d, int[] head_splits, "
        "str compiled_dims=\"nk\") -> ()");
  m.def("fp8_gemm_build(int m, int n, int k, bool fp32_out, int num_sms, str compiled_dims) -> str");
}

STABLE_TORCH_LIBRARY_IMPL(deep_gemm, CompositeExplicitAutograd, m) {
  m.impl("fp8_gemm_nt", TORCH_BOX(&deep_gemm::ops::fp8_gemm_nt));
  m.impl("fp8_gemm_nt_skip_head_mid", TORCH_BOX(&deep_gemm::ops::fp8_gemm_nt_skip_head_mid));
  m.impl("fp8_gemm_build", TORCH_BOX(&deep_gemm::ops::fp8_gemm_build));
}
