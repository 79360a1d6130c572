// Ops: the JIT runtime's configuration and introspection (deep_gemm._C.get_jit)
// and a compile-only entry used by `python -m deep_gemm.warmup` and the tests.
#include <torch/csrc/stable/library.h>

#include <string>
#include <tuple>
#include <vector>

#include "../runtime/jit.hpp"

namespace deep_gemm::ops {
namespace {

// Called by deep_gemm/_jit.py at import: the include root inside the wheel and
// what Python found (NVRTC and header wheels). Empty values keep the
// environment's choice (DG_JIT_* variables).
void jit_configure(std::string include_root, std::string nvrtc_library, std::vector<std::string> nvrtc_include_dirs) {
  JitContext::get().set_include_root(std::move(include_root));
  auto cfg = deep_jit::RuntimeConfig::from_env();
  if (cfg.nvrtc_library.empty()) cfg.nvrtc_library = std::move(nvrtc_library);
  if (cfg.nvrtc_include_dirs.empty()) cfg.nvrtc_include_dirs = std::move(nvrtc_include_dirs);
  deep_jit::Runtime::get().configure(std::move(cfg));
}

// Compiles (or finds in the cache) a kernel source; returns the cubin path.
std::string jit_build(std::string name, std::string code, std::string entry) {
  return deep_jit::Runtime::get().build(JitContext::get().source(std::move(name), std::move(code), std::move(entry)));
}

std::tuple<std::vector<std::string>, std::string, std::string, std::string, std::vector<std::string>, std::vector<int64_t>>
jit_info() {
  const auto info = deep_jit::Runtime::get().info();
  std::vector<int64_t> counters = {static_cast<int64_t>(info.kernels_loaded), static_cast<int64_t>(info.compiles),
                                   static_cast<int64_t>(info.compile_failures), static_cast<int64_t>(info.disk_hits),
                                   static_cast<int64_t>(info.repaired)};
  return {info.cache_roots, info.backend, info.compiler_path, info.compiler_version, info.loaded_names, counters};
}

}  // namespace
}  // namespace deep_gemm::ops

STABLE_TORCH_LIBRARY_FRAGMENT(deep_gemm, m) {
  m.def("jit_configure(str include_root, str nvrtc_library, str[] nvrtc_include_dirs) -> ()");
  m.def("jit_build(str name, str code, str entry) -> str");
  m.def("jit_info() -> (str[], str, str, str, str[], int[])");
}

STABLE_TORCH_LIBRARY_IMPL(deep_gemm, CompositeExplicitAutograd, m) {
  using namespace deep_gemm::ops;
  m.impl("jit_configure", TORCH_BOX(&jit_configure));
  m.impl("jit_build", TORCH_BOX(&jit_build));
  m.impl("jit_info", TORCH_BOX(&jit_info));
}
