// Ops: BF16 GEMMs on SM90 (API.md: bf16_gemm_*, m_grouped_bf16_gemm_*), D = C + A @ B^T with
// FP32 accumulation. The nn/tn/tt views, aliases and Python-level checks are in
// deep_gemm/_bf16_gemm.py.
//   bf16_gemm_nt: A [M, K] and B [N, K], each K-major or MN-major (wgmma reads either: no
//     transpose pass), D [M, N] bf16 or fp32 row-major, C None or D's dtype and layout (may be D).
//   m_grouped_bf16_gemm_nt_contiguous: A [M_sum, K] K-major, B [G, N, K] K-major or MN-major
//     (a transposed view of [G, K, N]), D [M_sum, N] bf16, grouped_layout as the FP8 op's.
//   m_grouped_bf16_gemm_nt_masked: A [G, max_m, K], B as above, D [G, max_m, N] bf16 (A's and
//     D's groups at any stride); bf16_hmk_hnk_hmn: einsum's per-head GEMMs on the same kernel.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <string>

#include "../launch/sm90_bf16_gemm.hpp"
#include "op_args.hpp"
#include "../torch/tensor_checks.hpp"

namespace deep_gemm::ops {
namespace {

// One operand's majorness and the pitch (bytes) of its outer dimension in memory: K-major
// X [rows, K] steps rows by stride(-2); MN-major steps K by stride(-1) (its rows are contiguous).
struct Bf16Operand {
  bool mn_major;
  uint64_t pitch_bytes;
};

Bf16Operand bf16_operand(const Tensor& x, const char* name, const char* op) {
  const int64_t d = x.dim();
  const int64_t rows = x.size(d - 2), k = x.size(d - 1);
  const bool k_major = x.stride(d - 1) == 1 || k == 1;
  const bool mn_major = x.stride(d - 2) == 1 || rows == 1;
  check_arg(k_major || mn_major, op, name, " must be K-major (stride(-1) == 1) or MN-major (stride(-2) == 1), got strides ",
            stride_str(x));
  const Bf16Operand out = k_major ? Bf16Operand{false, static_cast<uint64_t>(rows > 1 ? x.stride(d - 2) : k) * 2}
                                  : Bf16Operand{true, static_cast<uint64_t>(k > 1 ? x.stride(d - 1) : rows) * 2};
  check_arg(out.pitch_bytes % 16 == 0, op, name, "'s ", out.mn_major ? "K" : "row", " pitch must be a multiple of 16 bytes "
            "for the TMA, got ", out.pitch_bytes, " bytes (strides ", stride_str(x), ")");
  check_arg(reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0 || is_meta(x), op, name,
            "'s data must be 16-byte aligned for the TMA");
  return out;
}

// The launch fields every BF16 problem shares: sizes, compiled dims, device, operand
// pointers and pitches (A's and B's outer pitch in bytes), and the rows of A and D as 2-D views.
void set_bf16_operands(launch::Sm90Bf16Problem& p, const CompiledDims& cd, int64_t m, int64_t n, int64_t k,
                       int64_t rows, const Tensor& a, uint64_t lda_bytes, const Tensor& b, const Bf16Operand& ob,
                       const Tensor& d) {
  p.m = static_cast<int>(m);
  p.n = static_cast<int>(n);
  p.k = static_cast<int>(k);
  p.compiled_m = cd.m ? p.m : 0;
  p.compiled_n = cd.n ? p.n : 0;
  p.compiled_k = cd.k ? p.k : 0;
  p.device = d.get_device_index();
  p.mn_major_b = ob.mn_major;
  p.m_for_config = p.m;
  p.a = a.data_ptr();
  p.b = b.data_ptr();
  p.d = d.data_ptr();
  p.lda_bytes = lda_bytes;
  p.ldb_bytes = ob.pitch_bytes;
  p.ld_d = tma_row_pitch(d);
  p.a_rows = static_cast<uint64_t>(rows);
  p.d_rows = static_cast<uint64_t>(rows);
}

void bf16_gemm_nt(Tensor a, Tensor b, Tensor d, std::optional<Tensor> c, std::string compiled_dims) {
  constexpr const char* op = "bf16_gemm_nt";
  const ArgChecker chk(op);
  const CompiledDims cd = parse_compiled_dims(compiled_dims, op);
  chk.dim({a, "a"}, 2);
  chk.dim({b, "b"}, 2);
  chk.dim({d, "d"}, 2);
  chk.dtype({a, "a"}, ScalarType::BFloat16);
  chk.dtype({b, "b"}, ScalarType::BFloat16);
  const int64_t m = a.size(0), k = a.size(1), n = b.size(0);
  chk.size({b, "b"}, 1, k, "K, from a.shape[1]");
  chk.size({d, "d"}, 0, m, "M, from a.shape[0]");
  chk.size({d, "d"}, 1, n, "N, from b.shape[0]");
  chk.below_2_31({{"M", m}, {"N", n}, {"K", k}});
  check_plain_gemm_output(chk, d, c, m, n, op);
  const bool fp32_out = d.scalar_type() == ScalarType::Float;
  const bool c_is_d = c.has_value() && c->data_ptr() == d.data_ptr();
  const auto check_devices = [&] {
    chk.same_cuda_device({{a, "a"}, {b, "b"}, {d, "d"}});
    if (c.has_value()) chk.same_cuda_device({{d, "d"}, {*c, "c"}});
  };
  if (m == 0 || n == 0) return check_devices();
  chk.distinct_elements({{a, "a"}, {b, "b"}, {d, "d"}});
  chk.inner_contiguous({d, "d"}, "row-major");
  if (c.has_value()) {
    chk.distinct_elements({*c, "c"});
    check_arg((c->stride(1) == 1 || n == 1) && (c->stride(0) == d.stride(0) || m == 1), op,
              "c must have d's layout (row-major, row stride ", d.stride(0), "), got strides ", stride_str(*c));
    if (!c_is_d) chk.no_overlap({d, "d"}, {{*c, "c"}});
  }
  chk.no_overlap({d, "d"}, {{a, "a"}, {b, "b"}});
  chk.tma_aligned({d, "d"});
  const bool staged = !fp32_out && !c.has_value();
  if (staged) chk.tma_store_columns({d, "d"}, n);
  else check_arg(m == 1 || d.stride(0) % 2 == 0, op, "d's row stride must be even (column pairs are stored), got ", d.stride(0));
  check_devices();
  const Bf16Operand oa = bf16_operand(a, "a", op), ob = bf16_operand(b, "b", op);
  if (is_meta(d)) return;
  if (k == 0) {  // no product: D = C, or zeros
    if (!c.has_value()) torch::stable::zero_(d);
    else if (!c_is_d) torch::stable::copy_(d, *c);
    return;
  }
  launch::Sm90Bf16Problem p;
  set_bf16_operands(p, cd, m, n, k, m, a, oa.pitch_bytes, b, ob, d);
  p.mn_major_a = oa.mn_major;
  p.fp32_out = fp32_out;
  p.with_c = c.has_value();
  p.c = c.has_value() ? c->data_ptr() : nullptr;
  p.split_units_total = static_cast<int>((k + 63) / 64);  // split K may cut at any K block
  launch::Sm90Bf16GemmLauncher::get().run(p, op);
}

void check_group_index(const ArgChecker& chk, const Tensor& t, const char* name, int64_t len, const char* what,
                       const char* op) {
  check_arg(!t.is_cpu(), op, name, " must live on the GPU (the kernel reads it there and the host never does), got a "
            "CPU tensor");
  chk.dtype({t, name}, ScalarType::Int);
  chk.dim({t, name}, 1);
  chk.size({t, name}, 0, len, what);
  check_arg(t.stride(0) == 1 || len <= 1, op, name, " must be contiguous, got strides ", stride_str(t));
}

// B [G, N, K] (K-major, or MN-major: a transposed view of [G, K, N]), groups back to back.
Bf16Operand check_grouped_b(const ArgChecker& chk, const Tensor& b, int64_t g, int64_t n, int64_t k, const char* op) {
  chk.dtype({b, "b"}, ScalarType::BFloat16);
  chk.dim({b, "b"}, 3);
  chk.size({b, "b"}, 2, k, "K, from a.shape[-1]");
  check_arg(g > 0, op, "b must hold at least one group, got shape ", shape_str(b));
  const Bf16Operand ob = bf16_operand(b, "b", op);
  const int64_t group_elems = ob.mn_major ? k * b.stride(2) : n * b.stride(1);
  check_arg(g <= 1 || b.stride(0) == group_elems, op, "b's groups must be packed back to back (b.stride(0) == ",
            group_elems, "), got strides ", stride_str(b));
  check_arg(n * g < (int64_t(1) << 31) && k * g < (int64_t(1) << 31), op, "G * N and G * K must be below 2^31");
  return ob;
}


void m_grouped_bf16_gemm_nt_contiguous(Tensor a, Tensor b, Tensor d, Tensor grouped_layout, std::string compiled_dims,
                                       bool use_psum_layout, std::optional<int64_t> expected_m_for_psum_layout,
                                       bool ensure_zero_padding) {
  constexpr const char* op = "m_grouped_bf16_gemm_nt_contiguous";
  const ArgChecker chk(op);
  const CompiledDims cd = parse_compiled_dims(compiled_dims, op);
  chk.dim({a, "a"}, 2);
  chk.dim({d, "d"}, 2);
  chk.dtype({a, "a"}, ScalarType::BFloat16);
  chk.dtype({d, "d"}, ScalarType::BFloat16);
  const int64_t m = a.size(0), k = a.size(1);
  chk.dim({b, "b"}, 3);
  const int64_t g = b.size(0), n = b.size(1);
  chk.size({d, "d"}, 0, m, "M_sum, from a.shape[0]");
  chk.size({d, "d"}, 1, n, "N, from b.shape[1]");
  chk.below_2_31({{"M_sum", m}, {"N", n}, {"K", k}});
  check_arg(k > 0 && k % 64 == 0, op, "K must be a positive multiple of 64 (one BF16 K block), got K = ", k);
  const Bf16Operand ob = check_grouped_b(chk, b, g, n, k, op);
  const int64_t align = DeviceRuntime::get().mk_alignment_for_contiguous_layout();
  if (use_psum_layout) {
    check_group_index(chk, grouped_layout, "grouped_layout", g,
                      "the number of groups, from b.shape[0]: with use_psum_layout=True it holds each group's end row", op);
    if (expected_m_for_psum_layout.has_value())
      check_arg(*expected_m_for_psum_layout > 0 && *expected_m_for_psum_layout < (int64_t(1) << 31), op,
                "expected_m_for_psum_layout must be in [1, 2^31), got ", *expected_m_for_psum_layout);
  } else {
    check_arg(!expected_m_for_psum_layout.has_value(), op,
              "expected_m_for_psum_layout needs use_psum_layout=True (the index layout is costed from M_sum)");
    check_group_index(chk, grouped_layout, "grouped_layout", m, "M_sum, from a.shape[0]: the group index of each row", op);
    check_arg(m % align == 0, op, "M_sum (a.shape[0] = ", m, ") must be a multiple of the contiguous-layout alignment ",
              align, " (get_mk_alignment_for_contiguous_layout())");
  }
  const auto check_devices = [&] {
    chk.same_cuda_device({{a, "a"}, {b, "b"}, {d, "d"}, {grouped_layout, "grouped_layout"}});
  };
  if (m == 0 || n == 0) return check_devices();
  chk.distinct_elements({{a, "a"}, {b, "b"}, {d, "d"}});
  chk.inner_contiguous({a, "a"}, "K-major (the m-grouped BF16 kernel reads K-major A)");
  chk.inner_contiguous({d, "d"}, "row-major");
  chk.tma_aligned({a, "a"});
  chk.tma_aligned({d, "d"});
  chk.tma_store_columns({d, "d"}, n);
  chk.no_overlap({d, "d"}, {{a, "a"}, {b, "b"}, {grouped_layout, "grouped_layout"}});
  check_devices();
  if (is_meta(d)) return;
  if (use_psum_layout && ensure_zero_padding) torch::stable::zero_(d);  // rows outside the groups read zero
  launch::Sm90Bf16Problem p;
  set_bf16_operands(p, cd, m, n, k, m, a, tma_row_pitch(a) * 2, b, ob, d);
  p.num_groups = static_cast<int>(g);
  p.gemm_type = use_psum_layout ? 3 : 1;
  const bool per_group = use_psum_layout && expected_m_for_psum_layout.has_value();
  p.m_for_config = per_group ? static_cast<int>(*expected_m_for_psum_layout) : p.m;
  p.groups_for_config = per_group ? p.num_groups : 1;
  p.align_m = static_cast<int>(align);
  p.layout = static_cast<const int*>(grouped_layout.data_ptr());
  launch::Sm90Bf16GemmLauncher::get().run(p, op);
}

// The masked GEMM and einsum's per-head GEMMs: A [G, max_m, K] K-major, B [G, N, K] (K-major
// or MN-major, groups packed), D [G, max_m, N] bf16. A's and D's groups may lie at any
// 16-byte-multiple stride (rank-3 maps: einsum's heads interleave in their rows). masked_m
// null: every group computes all max_m rows.
void run_bf16_masked(const Tensor& a, const Tensor& b, const Tensor& d, const Tensor* masked_m, int64_t expected_m,
                     const CompiledDims& cd, const char* op) {
  const ArgChecker chk(op);
  chk.dim({a, "a"}, 3);
  chk.dim({d, "d"}, 3);
  chk.dtype({a, "a"}, ScalarType::BFloat16);
  chk.dtype({d, "d"}, ScalarType::BFloat16);
  const int64_t g = a.size(0), max_m = a.size(1), k = a.size(2);
  chk.dim({b, "b"}, 3);
  const int64_t n = b.size(1);
  chk.size({b, "b"}, 0, g, "the number of groups, from a.shape[0]");
  chk.size({d, "d"}, 0, g, "the number of groups, from a.shape[0]");
  chk.size({d, "d"}, 1, max_m, "max_m, from a.shape[1]");
  chk.size({d, "d"}, 2, n, "N, from b.shape[1]");
  chk.below_2_31({{"G * max_m", g * max_m}, {"N", n}, {"K", k}});
  check_arg(k > 0 && k % 64 == 0, op, "K must be a positive multiple of 64 (one BF16 K block), got K = ", k);
  const Bf16Operand ob = check_grouped_b(chk, b, g, n, k, op);
  if (masked_m != nullptr)
    check_group_index(chk, *masked_m, "masked_m", g, "the number of groups, from a.shape[0]", op);
  const auto check_devices = [&] {
    chk.same_cuda_device({{a, "a"}, {b, "b"}, {d, "d"}});
    if (masked_m != nullptr) chk.same_cuda_device({{d, "d"}, {*masked_m, "masked_m"}});
  };
  if (max_m == 0 || n == 0) return check_devices();
  chk.distinct_elements({{a, "a"}, {b, "b"}, {d, "d"}});
  chk.inner_contiguous({a, "a"}, "K-major");
  chk.inner_contiguous({d, "d"}, "row-major");
  chk.tma_aligned({a, "a"});
  chk.tma_aligned({d, "d"});
  chk.tma_store_columns({d, "d"}, n);
  chk.no_overlap({d, "d"}, {{a, "a"}, {b, "b"}});
  if (masked_m != nullptr) chk.no_overlap({d, "d"}, {{*masked_m, "masked_m"}});
  check_devices();
  if (is_meta(d)) return;
  launch::Sm90Bf16Problem p;
  set_bf16_operands(p, cd, max_m, n, k, max_m, a, group_row_pitch(a) * 2, b, ob, d);
  p.ld_d = group_row_pitch(d);
  // A lone group's stride is arbitrary (even 0): the maps get the packed one.
  p.a_group_bytes = g > 1 ? static_cast<uint64_t>(a.stride(0)) * 2 : p.lda_bytes * max_m;
  p.d_group_elems = g > 1 ? static_cast<uint64_t>(d.stride(0)) : p.ld_d * max_m;
  p.num_groups = static_cast<int>(g);
  p.gemm_type = 2;
  p.m_for_config = static_cast<int>(std::min(expected_m, max_m));
  p.groups_for_config = static_cast<int>(g);
  p.align_m = 1;
  p.layout = masked_m != nullptr ? static_cast<const int*>(masked_m->data_ptr()) : nullptr;
  p.all_rows = masked_m == nullptr;
  launch::Sm90Bf16GemmLauncher::get().run(p, op);
}

void m_grouped_bf16_gemm_nt_masked(Tensor a, Tensor b, Tensor d, Tensor masked_m, int64_t expected_m,
                                   std::string compiled_dims) {
  constexpr const char* op = "m_grouped_bf16_gemm_nt_masked";
  const CompiledDims cd = parse_compiled_dims(compiled_dims, op);
  check_arg(expected_m > 0 && expected_m < (int64_t(1) << 31), op,
            "expected_m must be in [1, 2^31) (the typical valid rows per group), got ", expected_m);
  run_bf16_masked(a, b, d, &masked_m, expected_m, cd, op);
}

// einsum's per-head forms (bhr,hdr->bhd, bhd,hdr->bhr): d[h] = a[h] @ b[h]^T for every head h
// over all rows, a [H, B, K] and d [H, B, N] head-major views of the caller's [B, H, .] tensors,
// b [H, N, K] K-major or MN-major: the masked GEMM with every group full.
void bf16_hmk_hnk_hmn(Tensor a, Tensor b, Tensor d) {
  constexpr const char* op = "einsum";
  // Costed at every row (run_bf16_masked clamps the expected rows to max_m).
  run_bf16_masked(a, b, d, nullptr, std::numeric_limits<int64_t>::max(), CompiledDims{}, op);
}

// einsum "bmk,bnk->mn": D = C + sum_b A[b] @ B[b]^T, A [S, M, K] and B [S, N, K] K-major (any
// batch and row strides that are 16-byte multiples), D [M, N] fp32 (C None or D itself) or
// bf16 (no C). One kernel: its K loop walks every batch's K blocks; with few output tiles
// (DeepSeek's shapes have 4) split K spreads the batches over CTAs into a workspace.
void bf16_bmk_bnk_mn(Tensor a, Tensor b, Tensor d, std::optional<Tensor> c) {
  constexpr const char* op = "einsum";
  const ArgChecker chk(op);
  chk.dim({a, "a"}, 3);
  chk.dim({b, "b"}, 3);
  chk.dim({d, "d"}, 2);
  chk.dtype({a, "a"}, ScalarType::BFloat16);
  chk.dtype({b, "b"}, ScalarType::BFloat16);
  const int64_t s = a.size(0), m = a.size(1), k = a.size(2), n = b.size(1);
  chk.size({b, "b"}, 0, s, "the batch size, from a.shape[0]");
  chk.size({b, "b"}, 2, k, "K, from a.shape[2]");
  chk.size({d, "d"}, 0, m, "M, from a.shape[1]");
  chk.size({d, "d"}, 1, n, "N, from b.shape[1]");
  chk.below_2_31({{"batches", s}, {"M", m}, {"N", n}, {"K", k}});
  const bool fp32_out = d.scalar_type() == ScalarType::Float;
  check_arg(fp32_out || d.scalar_type() == ScalarType::BFloat16, op,
            "bmk,bnk->mn: d must be torch.float32 or torch.bfloat16, got ", dtype_name(d.scalar_type()));
  if (c.has_value())
    check_arg(fp32_out && c->dim() == 2 && c->data_ptr() == d.data_ptr() && c->size(0) == m && c->size(1) == n &&
                  c->stride(0) == d.stride(0) && c->stride(1) == d.stride(1),
              op, "bmk,bnk->mn: c must be d itself (fp32, accumulated in place)");
  const auto check_devices = [&] { chk.same_cuda_device({{a, "a"}, {b, "b"}, {d, "d"}}); };
  if (m == 0 || n == 0) return check_devices();
  chk.distinct_elements({{a, "a"}, {b, "b"}, {d, "d"}});
  for (const auto& [t, name] : {std::pair<const Tensor*, const char*>{&a, "a"}, {&b, "b"}}) {
    check_arg(t->stride(2) == 1 || k == 1, op, "bmk,bnk->mn: ", name, " must be K-major (stride(2) == 1), got strides ",
              stride_str(*t));
    check_arg((t->size(1) <= 1 || t->stride(1) % 8 == 0) && (s <= 1 || t->stride(0) % 8 == 0), op, "bmk,bnk->mn: ",
              name, "'s row and batch strides must be multiples of 8 elements (16 bytes, for the TMA), got ",
              stride_str(*t));
    check_arg(reinterpret_cast<uintptr_t>(t->data_ptr()) % 16 == 0 || is_meta(*t), op, "bmk,bnk->mn: ", name,
              "'s data must be 16-byte aligned");
  }
  check_arg(k % 8 == 0, op, "bmk,bnk->mn: K must be a multiple of 8 (16-byte rows), got ", k);
  chk.inner_contiguous({d, "d"}, "row-major");
  chk.tma_aligned({d, "d"});
  if (fp32_out) check_arg(m == 1 || d.stride(0) % 2 == 0, op, "d's row stride must be even, got ", d.stride(0));
  else chk.tma_store_columns({d, "d"}, n);
  chk.no_overlap({d, "d"}, {{a, "a"}, {b, "b"}});
  check_devices();
  if (is_meta(d)) return;
  if (s == 0 || k == 0) {
    if (!c.has_value()) torch::stable::zero_(d);
    return;
  }
  launch::Sm90Bf16Problem p;
  const Bf16Operand ob{false, static_cast<uint64_t>(n > 1 ? b.stride(1) : k) * 2};
  set_bf16_operands(p, CompiledDims{}, m, n, k, m, a, static_cast<uint64_t>(m > 1 ? a.stride(1) : k) * 2, b, ob, d);
  p.fp32_out = fp32_out;
  p.with_c = c.has_value();
  p.c = c.has_value() ? d.data_ptr() : nullptr;
  p.num_batches = static_cast<int>(s);
  p.a_batch_bytes = static_cast<uint64_t>(s > 1 ? a.stride(0) : m * k) * 2;
  p.b_batch_bytes = static_cast<uint64_t>(s > 1 ? b.stride(0) : n * k) * 2;
  p.k_blocks_per_unit = static_cast<int>((k + 63) / 64);
  const auto sp = heuristics::sm90_bf16_workspace_split(m, n, s, p.k_blocks_per_unit, DeviceRuntime::get().num_sms(p.device));
  if (sp.units_per_split == 0) return launch::Sm90Bf16GemmLauncher::get().run(p, op);

  // Split over a workspace: the splits' FP32 partial sums, C (d itself) as one more slice,
  // reduced into d by aten::sum in a fixed order (deterministic, unlike atomics). Its rows
  // are padded to an even count of floats: the epilogue stores column pairs (8 bytes).
  const int64_t ld = n + (n & 1);
  const bool with_c = c.has_value();
  Tensor ws_rows = torch::stable::new_empty(d, {sp.splits + (with_c ? 1 : 0), m, ld}, ScalarType::Float);
  Tensor ws = ld == n ? ws_rows : torch::stable::narrow(ws_rows, 2, 0, n);
  if (with_c) {
    Tensor last = torch::stable::select(ws, 0, sp.splits);
    torch::stable::copy_(last, d);
  }
  p.ws_splits = sp.splits;
  p.ws_split_units = sp.units_per_split;
  p.fp32_out = true;
  p.with_c = false;
  p.c = nullptr;
  p.d = ws.data_ptr();
  p.ld_d = static_cast<uint64_t>(ld);
  p.d_rows = static_cast<uint64_t>(sp.splits * m);
  launch::Sm90Bf16GemmLauncher::get().run(p, op);
  const std::vector<int64_t> dim0{0};
  if (fp32_out) {
    torch::stable::sum_out(d, ws, torch::headeronly::IntHeaderOnlyArrayRef(dim0));
  } else {  // summed in FP32, rounded once
    Tensor sum = torch::stable::sum(ws, torch::headeronly::IntHeaderOnlyArrayRef(dim0));
    torch::stable::copy_(d, sum);
  }
}

// Compiles (no GPU needed) the kernel bf16_gemm_nt would use for this shape on a GPU with
// `num_sms` SMs; returns "<kernel name>\t<cubin path>". layout: the API's two letters
// (nt, nn, tn, tt); out: "bf16" or "fp32". For warmup and the ptxas checks of the tests.
std::string bf16_gemm_build(int64_t m, int64_t n, int64_t k, std::string layout, std::string out, bool with_c,
                            int64_t num_sms, std::string compiled_dims) {
  constexpr const char* op = "bf16_gemm_build";
  check_arg(m > 0 && n > 0 && k > 0, op, "need M, N, K > 0, got ", m, " x ", n, " x ", k);
  ArgChecker(op).below_2_31({{"M", m}, {"N", n}, {"K", k}});
  check_arg(layout == "nt" || layout == "nn" || layout == "tn" || layout == "tt", op,
            "layout must be nt, nn, tn or tt, got '", layout, "'");
  check_arg(out == "bf16" || out == "fp32", op, "out must be 'bf16' or 'fp32', got '", out, "'");
  check_arg(num_sms > 0 && num_sms <= 1024, op, "num_sms must be in [1, 1024], got ", num_sms);
  const CompiledDims cd = parse_compiled_dims(compiled_dims, op);
  const auto [mult_m, mult_n] = DeviceRuntime::get().block_size_multiple_of();
  launch::detail::Bf16ConfigKey key{int(m), int(n), int(k), cd.m ? int(m) : 0, cd.n ? int(n) : 0, cd.k ? int(k) : 0,
                                          int(num_sms), mult_m, mult_n, 0, layout[0] == 't', layout[1] == 'n',
                                          out == "fp32", with_c, 0, int(m), 1, 1};
  key.split_units_total = int((k + 63) / 64);  // as bf16_gemm_nt: split K may cut at any K block
  auto [cfg, src] = launch::plan_sm90_bf16_gemm(key, heuristics::kSm90MaxSmemBytes);
  return src.name + "\t" + deep_jit::Runtime::get().build(src);
}

// Compiles (no GPU needed) the kernel of an m-grouped BF16 GEMM: layout 'contiguous' (m =
// M_sum), 'psum' (expected_m > 0: the per-group count the op is given, else costed from M_sum)
// 'masked' (m = max_m, expected_m the typical valid rows) or 'heads' (the masked kernel without
// masked_m, every group all m rows: einsum's per-head GEMMs); mn_major_b: the nn form's B.
// Returns "<kernel name>\t<cubin path>", as m_grouped_fp8_gemm_build.
std::string m_grouped_bf16_gemm_build(std::string layout, int64_t m, int64_t n, int64_t k, int64_t num_groups,
                                      int64_t expected_m, int64_t num_sms, std::string compiled_dims,
                                      bool mn_major_b) {
  constexpr const char* op = "m_grouped_bf16_gemm_build";
  check_arg(layout == "contiguous" || layout == "psum" || layout == "masked" || layout == "heads", op,
            "layout must be 'contiguous', 'psum', 'masked' or 'heads', got '", layout, "'");
  check_arg(m > 0 && n > 0 && k > 0, op, "need M, N, K > 0, got ", m, " x ", n, " x ", k);
  check_arg(k % 64 == 0, op, "K must be a multiple of 64 (one BF16 K block), got K = ", k);
  check_arg(num_groups > 0, op, "num_groups must be > 0, got ", num_groups);
  ArgChecker(op).below_2_31({{"M", m}, {"N", n}, {"K", k}, {"num_groups", num_groups}, {"expected_m", expected_m}});
  check_arg(num_sms > 0 && num_sms <= 1024, op, "num_sms must be in [1, 1024], got ", num_sms);
  const bool heads = layout == "heads", masked = layout == "masked" || heads, psum = layout == "psum";
  check_arg(!masked || expected_m > 0, op, "expected_m must be > 0 for the masked layout, got ", expected_m);
  const CompiledDims cd = parse_compiled_dims(compiled_dims, op);
  const auto [mult_m, mult_n] = DeviceRuntime::get().block_size_multiple_of();
  const bool per_group = masked || (psum && expected_m > 0);
  const int align = masked ? 1 : static_cast<int>(DeviceRuntime::get().mk_alignment_for_contiguous_layout());
  launch::detail::Bf16ConfigKey key{int(m), int(n), int(k), cd.m ? int(m) : 0, cd.n ? int(n) : 0, cd.k ? int(k) : 0,
                                    int(num_sms), mult_m, mult_n, 0, false, mn_major_b, false, false,
                                    masked ? 2 : psum ? 3 : 1, per_group ? int(expected_m) : int(m),
                                    per_group ? int(num_groups) : 1, align};
  key.all_rows = heads;
  auto [cfg, src] = launch::plan_sm90_bf16_gemm(key, heuristics::kSm90MaxSmemBytes);
  return src.name + "\t" + deep_jit::Runtime::get().build(src);
}

}  // namespace
}  // namespace deep_gemm::ops

STABLE_TORCH_LIBRARY_FRAGMENT(deep_gemm, m) {
  m.def("bf16_gemm_nt(Tensor a, Tensor b, Tensor(a!) d, Tensor? c=None, str compiled_dims=\"nk\") -> ()");
  m.def("m_grouped_bf16_gemm_nt_contiguous(Tensor a, Tensor b, Tensor(a!) d, Tensor grouped_layout, "
        "str compiled_dims=\"nk\", bool use_psum_layout=False, int? expected_m_for_psum_layout=None, "
        "bool ensure_zero_padding=False) -> ()");
  m.def("m_grouped_bf16_gemm_nt_masked(Tensor a, Tensor b, Tensor(a!) d, Tensor masked_m, int expected_m, "
        "str compiled_dims=\"nk\") -> ()");
  m.def("bf16_bmk_bnk_mn(Tensor a, Tensor b, Tensor(a!) d, Tensor? c=None) -> ()");
  m.def("bf16_hmk_hnk_hmn(Tensor a, Tensor b, Tensor(a!) d) -> ()");
  m.def("bf16_gemm_build(int m, int n, int k, str layout, str out, bool with_c, int num_sms, str compiled_dims) -> str");
  m.def("m_grouped_bf16_gemm_build(str layout, int m, int n, int k, int num_groups, int expected_m, int num_sms, "
        "str compiled_dims, bool mn_major_b=False) -> str");
}

STABLE_TORCH_LIBRARY_IMPL(deep_gemm, CompositeExplicitAutograd, m) {
  m.impl("bf16_gemm_nt", TORCH_BOX(&deep_gemm::ops::bf16_gemm_nt));
  m.impl("m_grouped_bf16_gemm_nt_contiguous", TORCH_BOX(&deep_gemm::ops::m_grouped_bf16_gemm_nt_contiguous));
  m.impl("m_grouped_bf16_gemm_nt_masked", TORCH_BOX(&deep_gemm::ops::m_grouped_bf16_gemm_nt_masked));
  m.impl("bf16_bmk_bnk_mn", TORCH_BOX(&deep_gemm::ops::bf16_bmk_bnk_mn));
  m.impl("bf16_hmk_hnk_hmn", TORCH_BOX(&deep_gemm::ops::bf16_hmk_hnk_hmn));
  m.impl("bf16_gemm_build", TORCH_BOX(&deep_gemm::ops::bf16_gemm_build));
  m.impl("m_grouped_bf16_gemm_build", TORCH_BOX(&deep_gemm::ops::m_grouped_bf16_gemm_build));
}
