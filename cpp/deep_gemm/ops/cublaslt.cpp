// Op: cuBLASLt GEMM (API.md: cublaslt_gemm_{nt,nn,tn,tt}), D = C + A @ B^T with A [M, K] and
// B [N, K] each K-major or MN-major (the nn/tn/tt views are made in deep_gemm/_cublaslt.py).
// BF16 or FP8 e4m3 operands (FP8: both K-major, as cuBLASLt's FP8 kernels need), a bf16 or
// fp32 row-major D, C of D's dtype and shape (may be D: accumulate in place, beta = 1).
// Launched on torch's current stream with a workspace per (device, stream); the SM count
// follows set_num_sms. The library is loaded at run time (runtime/cublaslt.hpp).
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include "../runtime/cublaslt.hpp"
#include "../runtime/device_runtime.hpp"
#include "op_args.hpp"
#include "../torch/sf_layout.hpp"
#include "../torch/stream.hpp"
#include "../torch/tensor_checks.hpp"

namespace deep_gemm::ops {
namespace {

constexpr const char* kOp = "cublaslt_gemm_nt";
// torch's own cuBLASLt workspace size on Hopper.
constexpr int64_t kWorkspaceBytes = int64_t(32) << 20;

// A workspace per (device, stream): two streams never share one, and a tensor kept for the
// process's life stays valid in every CUDA graph that captured a call using it.
void* workspace_for(const Tensor& like, int device, void* stream) {
  static std::mutex mu;
  static std::map<std::pair<int, void*>, Tensor> spaces;
  std::lock_guard<std::mutex> lock(mu);
  auto it = spaces.find({device, stream});
  if (it == spaces.end()) {
    const int64_t bytes = kWorkspaceBytes;
    it = spaces.emplace(std::make_pair(device, stream), empty_on_device_of(like, &bytes, 1, aoti_torch_dtype_uint8()))
             .first;
  }
  return it->second.data_ptr();
}

// How cuBLASLt (column-major) sees a row-major-indexed operand X [rows, K]: K-major X is a
// column-major K x rows matrix (ld = stride(0)); MN-major X is rows x K (ld = stride(1)).
struct Operand {
  bool k_major;
  int64_t ld;
};

// x's last two dimensions [rows, K] (a 3-D x: each batch's matrix).
Operand operand(const Tensor& x, const char* name, const char* op = kOp) {
  const int64_t r = x.dim() - 2;
  const int64_t rows = x.size(r), k = x.size(r + 1), s_rows = x.stride(r), s_k = x.stride(r + 1);
  if (s_k == 1 || k == 1) return {true, rows > 1 ? s_rows : k};
  if (s_rows == 1 || rows == 1) return {false, k > 1 ? s_k : rows};
  fail_arg(op, name, " must be K-major (stride(", r + 1, ") == 1) or MN-major (stride(", r, ") == 1), got strides ",
           stride_str(x));
}

// cuBLASLt runs on the calling thread's current device: d's device for the call (a guard
// only where it differs, restoring the caller's on return).
class OnDevice {
 public:
  explicit OnDevice(int device) {
    if (torch::stable::accelerator::getCurrentDeviceIndex() != device) guard_.emplace(device);
  }

 private:
  std::optional<torch::stable::accelerator::DeviceGuard> guard_;
};

cublaslt::DataType lt_type(ScalarType t) {
  switch (t) {
    case ScalarType::BFloat16: return cublaslt::kBF16;
    case ScalarType::Float: return cublaslt::kF32;
    default: return cublaslt::kE4M3;
  }
}

void cublaslt_gemm_nt(Tensor a, Tensor b, Tensor d, std::optional<Tensor> c) {
  const ArgChecker chk(kOp);
  chk.dim({a, "a"}, 2);
  chk.dim({b, "b"}, 2);
  chk.dim({d, "d"}, 2);
  const int64_t m = a.size(0), k = a.size(1), n = b.size(0);
  chk.size({b, "b"}, 1, k, "K, from a.shape[1]");
  chk.size({d, "d"}, 0, m, "M, from a.shape[0]");
  chk.size({d, "d"}, 1, n, "N, from b.shape[0]");
  chk.below_2_31({{"M", m}, {"N", n}, {"K", k}});
  const ScalarType ta = a.scalar_type();
  check_arg(ta == ScalarType::BFloat16 || ta == ScalarType::Float8_e4m3fn, kOp,
            "a must be torch.bfloat16 or torch.float8_e4m3fn, got ", dtype_name(ta));
  check_arg(b.scalar_type() == ta, kOp, "b must have a's dtype ", dtype_name(ta), ", got ", dtype_name(b.scalar_type()));
  const bool fp8 = ta == ScalarType::Float8_e4m3fn;
  check_plain_gemm_output(chk, d, c, m, n, kOp);
  const auto check_devices = [&] {
    chk.same_cuda_device({{a, "a"}, {b, "b"}, {d, "d"}});
    if (c.has_value()) chk.same_cuda_device({{d, "d"}, {*c, "c"}});
  };
  if (m == 0 || n == 0) return check_devices();
  chk.distinct_elements({{a, "a"}, {b, "b"}, {d, "d"}});
  chk.inner_contiguous({d, "d"}, "row-major");
  const bool c_is_d = c.has_value() && c->data_ptr() == d.data_ptr();
  if (c.has_value()) {
    chk.inner_contiguous({*c, "c"}, "row-major");
    if (c_is_d)
      check_arg(c->stride(0) == d.stride(0) || m == 1, kOp, "c is d but with other strides: ", stride_str(*c), " vs ",
                stride_str(d));
    else
      chk.no_overlap({d, "d"}, {{*c, "c"}});
  }
  chk.no_overlap({d, "d"}, {{a, "a"}, {b, "b"}});
  check_devices();
  const Operand oa = operand(a, "a"), ob = operand(b, "b");
  if (fp8)
    check_arg(oa.k_major && ob.k_major, kOp, "FP8 operands must both be K-major (cuBLASLt's FP8 GEMMs are TN), got a ",
              oa.k_major ? "K" : "MN", "-major and b ", ob.k_major ? "K" : "MN", "-major");
  if (is_meta(d)) return;
  if (k == 0) {  // no product: D = C, or zeros
    if (!c.has_value()) torch::stable::zero_(d);
    else if (!c_is_d) torch::stable::copy_(d, *c);
    return;
  }

  const int device = d.get_device_index();
  const OnDevice on_device(device);
  // Column-major terms: D^T [N, M] = B [N, K] . A^T [K, M].
  cublaslt::Call call;
  const auto a_type = lt_type(ta), d_type = lt_type(d.scalar_type());
  call.trans_a = ob.k_major ? cublaslt::kOpT : cublaslt::kOpN;
  call.a = ob.k_major ? cublaslt::Matrix{a_type, uint64_t(k), uint64_t(n), ob.ld}
                      : cublaslt::Matrix{a_type, uint64_t(n), uint64_t(k), ob.ld};
  call.trans_b = oa.k_major ? cublaslt::kOpN : cublaslt::kOpT;
  call.b = oa.k_major ? cublaslt::Matrix{a_type, uint64_t(k), uint64_t(m), oa.ld}
                      : cublaslt::Matrix{a_type, uint64_t(m), uint64_t(k), oa.ld};
  const int64_t ld_d = m > 1 ? d.stride(0) : n;
  call.d = {d_type, uint64_t(n), uint64_t(m), ld_d};
  call.c = call.d;
  if (c.has_value() && !c_is_d) call.c.ld = m > 1 ? c->stride(0) : n;
  call.a_ptr = b.data_ptr();
  call.b_ptr = a.data_ptr();
  call.c_ptr = c.has_value() ? c->data_ptr() : d.data_ptr();
  call.d_ptr = d.data_ptr();
  call.beta = c.has_value() ? 1.0f : 0.0f;
  call.sm_count = DeviceRuntime::get().num_sms(device);
  call.fp8 = fp8;
  void* stream = torch_current_stream(device);
  cublaslt::matmul(call, device, stream, workspace_for(d, device, stream), kWorkspaceBytes, kOp);
}

// Strided-batched: D[i] = C[i] + A[i] @ B[i]^T for every batch i, A [B, M, K] and B [B, N, K]
// each K-major or MN-major in its last two dimensions with any batch stride, D [B, M, N]
// row-major in its last two, C None or D itself (beta = 1). For einsum's per-head forms.
void cublaslt_bmm_nt(Tensor a, Tensor b, Tensor d, std::optional<Tensor> c) {
  constexpr const char* op = "einsum";
  const ArgChecker chk(op);
  chk.dim({a, "a"}, 3);
  chk.dim({b, "b"}, 3);
  chk.dim({d, "d"}, 3);
  const int64_t bs = a.size(0), m = a.size(1), k = a.size(2), n = b.size(1);
  chk.size({b, "b"}, 0, bs, "the batch, from a");
  chk.size({b, "b"}, 2, k, "the reduced dimension, from a");
  chk.size({d, "d"}, 0, bs, "the batch, from a");
  chk.size({d, "d"}, 1, m, "from a");
  chk.size({d, "d"}, 2, n, "from b");
  chk.below_2_31({{"batch", bs}, {"M", m}, {"N", n}, {"K", k}});
  chk.dtype({a, "a"}, ScalarType::BFloat16);
  chk.dtype({b, "b"}, ScalarType::BFloat16);
  check_arg(d.scalar_type() == ScalarType::BFloat16 || d.scalar_type() == ScalarType::Float, op,
            "d must be torch.bfloat16 or torch.float32, got ", dtype_name(d.scalar_type()));
  if (c.has_value())
    check_arg(c->data_ptr() == d.data_ptr() && c->scalar_type() == d.scalar_type(), op,
              "c must be d itself (accumulated in place)");
  const auto check_devices = [&] { chk.same_cuda_device({{a, "a"}, {b, "b"}, {d, "d"}}); };
  if (bs == 0 || m == 0 || n == 0) return check_devices();
  chk.distinct_elements({{a, "a"}, {b, "b"}, {d, "d"}});
  check_arg(d.stride(2) == 1 || n == 1, op, "d must be row-major in its last two dimensions, got strides ", stride_str(d));
  chk.no_overlap({d, "d"}, {{a, "a"}, {b, "b"}});
  check_devices();
  // The per-batch matrices as the 2-D op sees them.
  const Operand oa = operand(a, "a", op), ob = operand(b, "b", op);
  if (is_meta(d)) return;
  if (k == 0) {
    if (!c.has_value()) torch::stable::zero_(d);
    return;
  }
  const int device = d.get_device_index();
  const OnDevice on_device(device);
  cublaslt::Call call;
  const auto d_type = lt_type(d.scalar_type());
  call.trans_a = ob.k_major ? cublaslt::kOpT : cublaslt::kOpN;
  call.a = ob.k_major ? cublaslt::Matrix{cublaslt::kBF16, uint64_t(k), uint64_t(n), ob.ld}
                      : cublaslt::Matrix{cublaslt::kBF16, uint64_t(n), uint64_t(k), ob.ld};
  call.trans_b = oa.k_major ? cublaslt::kOpN : cublaslt::kOpT;
  call.b = oa.k_major ? cublaslt::Matrix{cublaslt::kBF16, uint64_t(k), uint64_t(m), oa.ld}
                      : cublaslt::Matrix{cublaslt::kBF16, uint64_t(m), uint64_t(k), oa.ld};
  call.d = {d_type, uint64_t(n), uint64_t(m), m > 1 ? d.stride(1) : n};
  call.a.batch = call.b.batch = call.d.batch = static_cast<int>(bs);
  call.a.batch_stride = b.stride(0);
  call.b.batch_stride = a.stride(0);
  call.d.batch_stride = d.stride(0);
  call.c = call.d;
  call.a_ptr = b.data_ptr();
  call.b_ptr = a.data_ptr();
  call.c_ptr = d.data_ptr();
  call.d_ptr = d.data_ptr();
  call.beta = c.has_value() ? 1.0f : 0.0f;
  call.sm_count = DeviceRuntime::get().num_sms(device);
  void* stream = torch_current_stream(device);
  cublaslt::matmul(call, device, stream, workspace_for(d, device, stream), kWorkspaceBytes, op);
}

// The loaded library and its version, "" before the first call loads it: for get_jit().
std::string cublaslt_info() {
  const auto& lt = cublaslt::api();
  return lt.path + "\t" + std::to_string(lt.version);
}

}  // namespace
}  // namespace deep_gemm::ops

STABLE_TORCH_LIBRARY_FRAGMENT(deep_gemm, m) {
  m.def("cublaslt_gemm_nt(Tensor a, Tensor b, Tensor(a!) d, Tensor? c=None) -> ()");
  m.def("cublaslt_info() -> str");
  m.def("cublaslt_bmm_nt(Tensor a, Tensor b, Tensor(a!) d, Tensor? c=None) -> ()");
}

STABLE_TORCH_LIBRARY_IMPL(deep_gemm, CompositeExplicitAutograd, m) {
  m.impl("cublaslt_gemm_nt", TORCH_BOX(&deep_gemm::ops::cublaslt_gemm_nt));
  m.impl("cublaslt_info", TORCH_BOX(&deep_gemm::ops::cublaslt_info));
  m.impl("cublaslt_bmm_nt", TORCH_BOX(&deep_gemm::ops::cublaslt_bmm_nt));
}
