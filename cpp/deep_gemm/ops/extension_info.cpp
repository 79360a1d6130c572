// The deep_gemm namespace itself (the one DEF block; every other ops/*.cpp adds a
// fragment) and `_extension_info`: which file registered torch.ops.deep_gemm in
// this process, and its build id (see extension.cpp: a second copy registers
// nothing, so the answer always names the first one).
#include <torch/csrc/stable/library.h>

#include <cstdint>
#include <string>
#include <tuple>

extern "C" const char* deep_gemm_extension_identity_v1();  // extension.cpp

namespace deep_gemm::ops {
namespace {

std::tuple<std::string, std::string> extension_info() {
  const std::string line = deep_gemm_extension_identity_v1();
  const auto tab = line.find('\t');
  const auto tab2 = line.find('\t', tab + 1);
  return {line.substr(0, tab), line.substr(tab + 1, tab2 - tab - 1)};
}

// The stable-ABI target the extension was built for (TORCH_TARGET_VERSION:
// major in bits 56..63, minor in 48..55): it runs on that torch and newer.
std::tuple<int64_t, int64_t> _build_info() {
  const auto v = static_cast<uint64_t>(TORCH_TARGET_VERSION);
  return {static_cast<int64_t>(v >> 56), static_cast<int64_t>((v >> 48) & 0xff)};
}

}  // namespace
}  // namespace deep_gemm::ops

STABLE_TORCH_LIBRARY(deep_gemm, m) {
  m.def("_extension_info() -> (str path, str build_id)");
  m.def("_build_info() -> (int torch_target_major, int torch_target_minor)");
}

STABLE_TORCH_LIBRARY_IMPL(deep_gemm, CompositeExplicitAutograd, m) {
  m.impl("_extension_info", TORCH_BOX(&deep_gemm::ops::extension_info));
  m.impl("_build_info", TORCH_BOX(&deep_gemm::ops::_build_info));
}
