// Op: the TF32 HyperConnection prenorm GEMM on SM90 (API.md: tf32_hc_prenorm_gemm).
//   a [M, K] bf16 K-major, b [N, K] fp32 K-major; N in {8, 16, 24, 32}, K a positive multiple
//   of 64 (the SM90 limits of upstream's kernel).
//   num_splits None: d [M, N] = a @ b^T (TF32 products, FP32 sums), sqr_sum [M] = row sums of a^2.
//   num_splits S:    d [S, M, N] and sqr_sum [S, M] hold the partial sums over S balanced
//                    ranges of the K / 64 K blocks (the first (K / 64) % S ranges one block
//                    longer; a range with no block writes zeros): d.sum(0), sqr_sum.sum(0)
//                    are the results.
// Either way the kernel may split K further over several CTAs, which meet in a workspace
// (one per device and stream for eager launches, its own for a captured one: hc_workspace),
// so the outputs are written once, in a fixed summation order. Python facade: deep_gemm/_hyperconnection.py.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../launch/sm90_tf32_hc_prenorm.hpp"
#include "op_args.hpp"
#include "../torch/sf_layout.hpp"
#include "../torch/stream.hpp"
#include "../torch/tensor_checks.hpp"

namespace deep_gemm::ops {
namespace {

// The K parts' workspace (counters that every launch leaves zero, and partial sums) for the
// current stream of `like`'s device. Eager launches on one stream run one after another, so
// they share one buffer per device and stream, zeroed once and kept for the process's life
// (no memset per call); two streams never share one. Under CUDA graph capture a buffer made
// now would be zeroed only by the graph, and a graph may be replayed on any stream beside
// eager work: a captured launch gets its own zeroed temporary instead (the memset a node of
// the graph, the memory the graph pool's, as for any temporary torch allocates in capture).
// `scratch` holds that temporary until the launch is enqueued.
void* hc_workspace(const Tensor& like, size_t bytes, std::optional<Tensor>& scratch) {
  const int device = like.get_device_index();
  CUstream stream = torch_current_stream(device);
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult r;
  {
    const deep_jit::detail::ScopedDeviceContext context(device);  // a thread may hold no context yet
    r = deep_jit::detail::driver().stream_is_capturing(stream, &capture);
  }
  check_arg(r == CUDA_SUCCESS, "tf32_hc_prenorm_gemm", "cuStreamIsCapturing failed (", static_cast<int>(r), ")");
  const int64_t size = static_cast<int64_t>(std::max<size_t>(bytes, size_t(1) << 20));
  if (capture != CU_STREAM_CAPTURE_STATUS_NONE) {
    scratch = empty_on_device_of(like, &size, 1, aoti_torch_dtype_uint8());
    torch::stable::zero_(*scratch);
    return scratch->data_ptr();
  }
  static std::mutex mu;
  static std::map<std::pair<int, void*>, std::vector<Tensor>> spaces;
  std::lock_guard<std::mutex> lock(mu);
  auto& held = spaces[{device, reinterpret_cast<void*>(stream)}];
  if (held.empty() || static_cast<size_t>(held.back().numel()) < bytes) {
    held.push_back(empty_on_device_of(like, &size, 1, aoti_torch_dtype_uint8()));
    torch::stable::zero_(held.back());
  }
  return held.back().data_ptr();
}

// The SM90 kernel's limits on N and K, in the words of an error of `op`.
void check_hc_sizes(int64_t n, int64_t k, const char* op) {
  check_arg(n > 0 && n <= 32 && n % 8 == 0, op, "N (b.shape[0]) must be 8, 16, 24 or 32 on SM90 (at most 32, a "
            "multiple of 8), got N = ", n);
  check_arg(k > 0 && k % 64 == 0, op, "K must be a positive multiple of 64 on SM90, got K = ", k);
}

void tf32_hc_prenorm_gemm(Tensor a, Tensor b, Tensor d, Tensor sqr_sum, std::optional<int64_t> num_splits) {
  constexpr const char* op = "tf32_hc_prenorm_gemm";
  const ArgChecker chk(op);
  const bool split = num_splits.has_value();
  if (split)
    check_arg(*num_splits >= 1 && *num_splits < (int64_t(1) << 16), op, "num_splits must be in [1, 65536), got ",
              *num_splits);
  const int64_t s = split ? *num_splits : 1;
  chk.dim({a, "a"}, 2);
  chk.dim({b, "b"}, 2);
  chk.dtype({a, "a"}, ScalarType::BFloat16);
  chk.dtype({b, "b"}, ScalarType::Float);
  chk.dtype({d, "d"}, ScalarType::Float);
  chk.dtype({sqr_sum, "sqr_sum"}, ScalarType::Float);
  const int64_t m = a.size(0), k = a.size(1), n = b.size(0);
  chk.size({b, "b"}, 1, k, "K, from a.shape[1]");
  if (split) {
    check_arg(d.dim() == 3, op, "d must be 3-D [num_splits, M, N] when num_splits is given, got shape ", shape_str(d));
    check_arg(sqr_sum.dim() == 2, op, "sqr_sum must be 2-D [num_splits, M] when num_splits is given, got shape ",
              shape_str(sqr_sum));
    chk.size({d, "d"}, 0, s, "num_splits");
    chk.size({sqr_sum, "sqr_sum"}, 0, s, "num_splits");
  } else {
    check_arg(d.dim() == 2, op, "d must be 2-D [M, N] when num_splits is None (3-D d needs num_splits), got shape ",
              shape_str(d));
    check_arg(sqr_sum.dim() == 1, op, "sqr_sum must be 1-D [M] when num_splits is None, got shape ", shape_str(sqr_sum));
  }
  chk.size({d, "d"}, d.dim() - 2, m, "M, from a.shape[0]");
  chk.size({d, "d"}, d.dim() - 1, n, "N, from b.shape[0]");
  chk.size({sqr_sum, "sqr_sum"}, sqr_sum.dim() - 1, m, "M, from a.shape[0]");
  check_hc_sizes(n, k, op);
  chk.below_2_31({{"M", m}, {"K", k}, {"ceil(M / 64) * num_splits * 64 (the grid)", ceil_div(m, 64) * s * 64}});
  const auto check_devices = [&] {
    chk.same_cuda_device({{a, "a"}, {b, "b"}, {d, "d"}, {sqr_sum, "sqr_sum"}});
  };
  if (m == 0) return check_devices();
  chk.distinct_elements({{a, "a"}, {b, "b"}, {d, "d"}, {sqr_sum, "sqr_sum"}});
  chk.inner_contiguous({a, "a"}, "K-major");
  chk.inner_contiguous({b, "b"}, "K-major");
  chk.inner_contiguous({d, "d"}, "row-major");
  chk.inner_contiguous({sqr_sum, "sqr_sum"}, "contiguous along M");
  chk.tma_aligned({a, "a"});
  chk.tma_aligned({b, "b"});
  const int64_t ld_d = m > 1 ? d.stride(d.dim() - 2) : n;
  check_arg(ld_d % 2 == 0, op, "d's row stride must be even (column pairs are stored as 8 bytes), got strides ",
            stride_str(d));
  check_arg(is_meta(d) || reinterpret_cast<uintptr_t>(d.data_ptr()) % 8 == 0, op,
            "d's data must be 8-byte aligned (column pairs are stored as 8 bytes)");
  chk.no_overlap({d, "d"}, {{a, "a"}, {b, "b"}, {sqr_sum, "sqr_sum"}});
  chk.no_overlap({sqr_sum, "sqr_sum"}, {{a, "a"}, {b, "b"}});
  check_devices();
  if (is_meta(d)) return;
  launch::Sm90HcPrenormProblem p;
  p.m = static_cast<int>(m);
  p.n = static_cast<int>(n);
  p.k = static_cast<int>(k);
  p.num_splits = static_cast<int>(s);
  p.device = d.get_device_index();
  p.a = a.data_ptr();
  p.b = b.data_ptr();
  p.d = static_cast<float*>(d.data_ptr());
  p.sqr_sum = static_cast<float*>(sqr_sum.data_ptr());
  p.lda_bytes = tma_row_pitch(a) * 2;
  p.ldb_bytes = tma_row_pitch(b) * 4;
  p.ld_d = static_cast<uint64_t>(ld_d);
  p.d_split_stride = s > 1 ? static_cast<uint64_t>(d.stride(0)) : 0;
  p.s_split_stride = s > 1 ? static_cast<uint64_t>(sqr_sum.stride(0)) : 0;
  std::optional<Tensor> scratch;  // a captured launch's workspace, freed once it is enqueued
  launch::Sm90HcPrenormLauncher::get().run(p, op, [&](size_t bytes) { return hc_workspace(d, bytes, scratch); });
}

// Compiles (no GPU needed) the kernel tf32_hc_prenorm_gemm would use for this shape on a GPU
// with `num_sms` SMs; returns "<kernel name>\t<cubin path>". For warmup and the SASS tests.
std::string tf32_hc_prenorm_gemm_build(int64_t m, int64_t n, int64_t k, std::optional<int64_t> num_splits,
                                       int64_t num_sms) {
  constexpr const char* op = "tf32_hc_prenorm_gemm_build";
  check_arg(m > 0 && m < (int64_t(1) << 31), op, "M must be in [1, 2^31), got ", m);
  check_hc_sizes(n, k, op);
  check_arg(k < (int64_t(1) << 31), op, "K must be below 2^31, got ", k);
  const int64_t s = num_splits.value_or(1);
  check_arg(s >= 1 && s < (int64_t(1) << 16), op, "num_splits must be in [1, 65536), got ", s);
  check_arg(num_sms > 0 && num_sms <= 1024, op, "num_sms must be in [1, 1024], got ", num_sms);
  const launch::detail::HcPrenormConfigKey key{int(m), int(n), int(k), int(s), int(num_sms), 0};
  auto [cfg, src] = launch::plan_sm90_hc_prenorm(key, heuristics::kSm90MaxSmemBytes);
  return src.name + "\t" + deep_jit::Runtime::get().build(src);
}

}  // namespace
}  // namespace deep_gemm::ops

STABLE_TORCH_LIBRARY_FRAGMENT(deep_gemm, m) {
  m.def("tf32_hc_prenorm_gemm(Tensor a, Tensor b, Tensor(a!) d, Tensor(b!) sqr_sum, int? num_splits=None) -> ()");
  m.def("tf32_hc_prenorm_gemm_build(int m, int n, int k, int? num_splits, int num_sms) -> str");
}

STABLE_TORCH_LIBRARY_IMPL(deep_gemm, CompositeExplicitAutograd, m) {
  m.impl("tf32_hc_prenorm_gemm", TORCH_BOX(&deep_gemm::ops::tf32_hc_prenorm_gemm));
  m.impl("tf32_hc_prenorm_gemm_build", TORCH_BOX(&deep_gemm::ops::tf32_hc_prenorm_gemm_build));
}
