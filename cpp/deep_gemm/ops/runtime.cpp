// Ops: runtime knobs and layout arithmetic (API.md P0). No tensors involved;
// each op validates its argument and forwards to DeviceRuntime.
#include <torch/csrc/stable/library.h>

#include <cstdint>
#include <vector>

#include "../runtime/device_runtime.hpp"
#include "../torch/device.hpp"

namespace deep_gemm::ops {
namespace {

DeviceRuntime& rt() { return DeviceRuntime::get(); }

void set_num_sms(int64_t n) { rt().set_num_sms(n, current_cuda_device()); }
int64_t get_num_sms() { return rt().num_sms(current_cuda_device()); }
void set_tc_util(int64_t pct) { rt().set_tc_util(pct); }
int64_t get_tc_util() { return rt().tc_util(); }
void set_pdl(bool on) { rt().set_pdl(on); }
bool get_pdl() { return rt().pdl(); }
void set_ignore_compile_dims(bool on) { rt().set_ignore_compile_dims(on); }
bool get_ignore_compile_dims() { return rt().ignore_compile_dims(); }
void set_block_size_multiple_of(int64_t m, int64_t n) { rt().set_block_size_multiple_of(m, n); }
std::vector<int64_t> get_block_size_multiple_of() {
  auto [m, n] = rt().block_size_multiple_of();
  return {m, n};
}
void set_mk_alignment(int64_t v) { rt().set_mk_alignment_for_contiguous_layout(v); }
int64_t get_mk_alignment() { return rt().mk_alignment_for_contiguous_layout(); }
int64_t get_theoretical_mk_alignment(int64_t expected_m) { return DeviceRuntime::theoretical_mk_alignment(expected_m); }

// TMA wants every non-innermost stride 16-byte aligned: round x (a count of
// elements) up so that x * element_size is a multiple of 16.
int64_t get_tma_aligned_size(int64_t x, int64_t element_size) {
  check_arg(x >= 0, "get_tma_aligned_size", "x must be non-negative, got ", x);
  check_arg(element_size == 1 || element_size == 2 || element_size == 4 || element_size == 8, "get_tma_aligned_size",
            "element_size must be 1, 2, 4 or 8 bytes, got ", element_size);
  const int64_t per16 = 16 / element_size;
  check_arg(x <= INT64_MAX - (per16 - 1), "get_tma_aligned_size", "x rounded up to a multiple of ", per16,
            " must fit in 64 bits, got x = ", x);
  return (x + per16 - 1) / per16 * per16;
}

int64_t get_device_sm_count() { return DeviceRuntime::device_sm_count(current_cuda_device()); }

}  // namespace
}  // namespace deep_gemm::ops

STABLE_TORCH_LIBRARY_FRAGMENT(deep_gemm, m) {
  m.def("set_num_sms(int num_sms) -> ()");
  m.def("get_num_sms() -> int");
  m.def("get_device_sm_count() -> int");
  m.def("set_tc_util(int tc_util) -> ()");
  m.def("get_tc_util() -> int");
  m.def("set_pdl(bool enable) -> ()");
  m.def("get_pdl() -> bool");
  m.def("set_ignore_compile_dims(bool ignore) -> ()");
  m.def("get_ignore_compile_dims() -> bool");
  m.def("set_block_size_multiple_of(int block_m, int block_n) -> ()");
  m.def("get_block_size_multiple_of() -> int[]");
  m.def("set_mk_alignment_for_contiguous_layout(int alignment) -> ()");
  m.def("get_mk_alignment_for_contiguous_layout() -> int");
  m.def("get_theoretical_mk_alignment_for_contiguous_layout(int expected_m=0) -> int");
  m.def("get_tma_aligned_size(int x, int element_size) -> int");
}

STABLE_TORCH_LIBRARY_IMPL(deep_gemm, CompositeExplicitAutograd, m) {
  using namespace deep_gemm::ops;
  m.impl("set_num_sms", TORCH_BOX(&set_num_sms));
  m.impl("get_num_sms", TORCH_BOX(&get_num_sms));
  m.impl("get_device_sm_count", TORCH_BOX(&get_device_sm_count));
  m.impl("set_tc_util", TORCH_BOX(&set_tc_util));
  m.impl("get_tc_util", TORCH_BOX(&get_tc_util));
  m.impl("set_pdl", TORCH_BOX(&set_pdl));
  m.impl("get_pdl", TORCH_BOX(&get_pdl));
  m.impl("set_ignore_compile_dims", TORCH_BOX(&set_ignore_compile_dims));
  m.impl("get_ignore_compile_dims", TORCH_BOX(&get_ignore_compile_dims));
  m.impl("set_block_size_multiple_of", TORCH_BOX(&set_block_size_multiple_of));
  m.impl("get_block_size_multiple_of", TORCH_BOX(&get_block_size_multiple_of));
  m.impl("set_mk_alignment_for_contiguous_layout", TORCH_BOX(&set_mk_alignment));
  m.impl("get_mk_alignment_for_contiguous_layout", TORCH_BOX(&get_mk_alignment));
  m.impl("get_theoretical_mk_alignment_for_contiguous_layout", TORCH_BOX(&get_theoretical_mk_alignment));
  m.impl("get_tma_aligned_size", TORCH_BOX(&get_tma_aligned_size));
}
