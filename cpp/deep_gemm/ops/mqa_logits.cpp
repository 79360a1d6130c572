// Op: the V3.2 indexer's dense (prefill) MQA logits on SM90 (API.md: fp8_mqa_logits,
// fp8_fp4_mqa_logits). The Python facade (deep_gemm/_mqa_logits.py) allocates upstream's
// padded output and passes its logical view here; the kernel writes that view only.
//   q [S, H, D] e4m3 contiguous, kv [S_kv, D] e4m3 (rows 16-byte aligned), kv_sf [S_kv] fp32
//   contiguous (16-byte aligned), weights [S, H] fp32 (stride(1) == 1), ks / ke [S] int32
//   contiguous; logits [S, S_kv] (or [S, max_seqlen_k]) fp32 or bf16, stride(1) == 1.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <cstdint>

#include "../launch/sm90_mqa_logits.hpp"
#include "op_args.hpp"
#include "../torch/tensor_checks.hpp"

namespace deep_gemm::ops {
namespace {

void check_window_tensor(const ArgChecker& chk, const Tensor& t, const char* name, int64_t s, const char* op) {
  chk.dim({t, name}, 1);
  chk.dtype({t, name}, ScalarType::Int);
  chk.size({t, name}, 0, s, "S, from q.shape[0]");
  check_arg(t.stride(0) == 1 || s <= 1, op, name, " must be contiguous, got strides ", stride_str(t));
}

void fp8_mqa_logits(Tensor q, Tensor kv, Tensor kv_sf, Tensor weights, Tensor ks, Tensor ke, Tensor logits,
                    bool clean_logits, int64_t max_seqlen_k) {
  constexpr const char* op = "fp8_mqa_logits";
  const ArgChecker chk(op);
  chk.dim({q, "q"}, 3);
  chk.dtype({q, "q"}, ScalarType::Float8_e4m3fn);
  const int64_t s = q.size(0), h = q.size(1), d = q.size(2);
  check_arg(h == 8 || h == 16 || h == 32 || h == 64, op, "the number of heads (q.shape[1]) must be 8, 16, 32 or 64 "
            "on SM90, got ", h);
  check_arg(d == 32 || d == 64 || d == 128, op, "the head dimension (q.shape[2]) must be 32, 64 or 128, got ", d);
  check_arg(q.stride(2) == 1 && q.stride(1) == d && (q.stride(0) == h * d || s <= 1), op,
            "q must be contiguous, got strides ", stride_str(q));
  chk.dim({kv, "kv"}, 2);
  chk.dtype({kv, "kv"}, ScalarType::Float8_e4m3fn);
  const int64_t skv = kv.size(0);
  chk.size({kv, "kv"}, 1, d, "D, from q.shape[2]");
  chk.inner_contiguous({kv, "kv"}, "row-major");
  chk.dim({kv_sf, "kv_sf"}, 1);
  chk.dtype({kv_sf, "kv_sf"}, ScalarType::Float);
  chk.size({kv_sf, "kv_sf"}, 0, skv, "S_kv, from kv.shape[0]");
  check_arg(kv_sf.stride(0) == 1 || skv <= 1, op, "kv_sf must be contiguous, got strides ", stride_str(kv_sf));
  chk.dim({weights, "weights"}, 2);
  chk.dtype({weights, "weights"}, ScalarType::Float);
  chk.size({weights, "weights"}, 0, s, "S, from q.shape[0]");
  chk.size({weights, "weights"}, 1, h, "H, from q.shape[1]");
  chk.inner_contiguous({weights, "weights"}, "row-major");
  check_window_tensor(chk, ks, "cu_seq_len_k_start", s, op);
  check_window_tensor(chk, ke, "cu_seq_len_k_end", s, op);
  check_arg(max_seqlen_k >= 0, op, "max_seqlen_k must be >= 0, got ", max_seqlen_k);
  check_arg(!(clean_logits && max_seqlen_k > 0), op, "clean_logits must be False with max_seqlen_k > 0 (the compressed "
            "form has no cells outside the windows to clean)");
  chk.dim({logits, "logits"}, 2);
  check_arg(logits.scalar_type() == ScalarType::Float || logits.scalar_type() == ScalarType::BFloat16, op,
            "logits must be torch.float32 or torch.bfloat16, got ", dtype_name(logits.scalar_type()));
  chk.size({logits, "logits"}, 0, s, "S, from q.shape[0]");
  chk.size({logits, "logits"}, 1, max_seqlen_k > 0 ? max_seqlen_k : skv,
           max_seqlen_k > 0 ? "max_seqlen_k" : "S_kv, from kv.shape[0]");
  chk.inner_contiguous({logits, "logits"}, "row-major");
  chk.below_2_31({{"S", s}, {"S_kv", skv}, {"S * H", s * h}});
  chk.same_cuda_device({{q, "q"}, {kv, "kv"}, {kv_sf, "kv_sf"}, {weights, "weights"}, {ks, "cu_seq_len_k_start"},
                        {ke, "cu_seq_len_k_end"}, {logits, "logits"}});
  if (s == 0 || skv == 0 || logits.size(1) == 0) return;  // no key: every window is empty, nothing to write
  chk.distinct_elements({{logits, "logits"}, {kv, "kv"}, {weights, "weights"}});
  chk.no_overlap({logits, "logits"}, {{q, "q"}, {kv, "kv"}, {kv_sf, "kv_sf"}, {weights, "weights"},
                                      {ks, "cu_seq_len_k_start"}, {ke, "cu_seq_len_k_end"}});
  chk.tma_aligned({q, "q"});
  chk.tma_aligned({kv, "kv"});
  chk.tma_aligned({kv_sf, "kv_sf"});
  if (is_meta(logits)) return;

  launch::Sm90MqaLogitsProblem p;
  p.seq_len = static_cast<int>(s);
  p.seq_len_kv = static_cast<int>(skv);
  p.heads = static_cast<int>(h);
  p.head_dim = static_cast<int>(d);
  p.max_seqlen_k = static_cast<int>(max_seqlen_k);
  p.clean = clean_logits;
  p.bf16_out = logits.scalar_type() == ScalarType::BFloat16;
  p.device = q.get_device_index();
  p.q = q.data_ptr();
  p.kv = kv.data_ptr();
  p.kv_sf = kv_sf.data_ptr();
  p.weights = weights.data_ptr();
  p.ks = static_cast<const int*>(ks.data_ptr());
  p.ke = static_cast<const int*>(ke.data_ptr());
  p.logits = logits.data_ptr();
  p.kv_ld_bytes = static_cast<uint64_t>(skv > 1 ? kv.stride(0) : d);
  p.ld_weights = static_cast<uint64_t>(s > 1 ? weights.stride(0) : h);
  p.ld_logits = static_cast<uint64_t>(s > 1 ? logits.stride(0) : logits.size(1));
  launch::Sm90MqaLogitsLauncher::get().run(p, op);
}

// Compiles (no GPU needed) the kernel fp8_mqa_logits uses for H heads of dimension D;
// returns "<kernel name>\t<cubin path>". out: "fp32" or "bf16"; form: "clean", "plain" or
// "compressed". For warmup and the SASS checks of the tests.
std::string fp8_mqa_logits_build(int64_t heads, int64_t head_dim, std::string out, std::string form) {
  constexpr const char* op = "fp8_mqa_logits_build";
  check_arg(heads == 8 || heads == 16 || heads == 32 || heads == 64, op, "heads must be 8, 16, 32 or 64, got ", heads);
  check_arg(head_dim == 32 || head_dim == 64 || head_dim == 128, op, "head_dim must be 32, 64 or 128, got ", head_dim);
  check_arg(out == "fp32" || out == "bf16", op, "out must be 'fp32' or 'bf16', got '", out, "'");
  check_arg(form == "clean" || form == "plain" || form == "compressed", op,
            "form must be 'clean', 'plain' or 'compressed', got '", form, "'");
  const launch::detail::MqaLogitsKey key{int(heads), int(head_dim), 132, 0, out == "bf16", form == "compressed",
                                         form == "clean", 0};
  auto [cfg, src] = launch::plan_sm90_mqa_logits(key, heuristics::kSm90MaxSmemBytes);
  return src.name + "\t" + deep_jit::Runtime::get().build(src);
}

}  // namespace
}  // namespace deep_gemm::ops

STABLE_TORCH_LIBRARY_FRAGMENT(deep_gemm, m) {
  m.def("fp8_mqa_logits(Tensor q, Tensor kv, Tensor kv_sf, Tensor weights, Tensor cu_seq_len_k_start, "
        "Tensor cu_seq_len_k_end, Tensor(a!) logits, bool clean_logits, int max_seqlen_k) -> ()");
  m.def("fp8_mqa_logits_build(int heads, int head_dim, str out, str form) -> str");
}

STABLE_TORCH_LIBRARY_IMPL(deep_gemm, CompositeExplicitAutograd, m) {
  m.impl("fp8_mqa_logits", TORCH_BOX(&deep_gemm::ops::fp8_mqa_logits));
  m.impl("fp8_mqa_logits_build", TORCH_BOX(&deep_gemm::ops::fp8_mqa_logits_build));
}
