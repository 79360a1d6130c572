// Ops: the JIT runtime's configuration and introspection (deep_gemm._C.get_jit),
// compile-only entries used by `python -m deep_gemm.warmup` and the tests, and
// the doctor's self-test kernel.
#include <torch/csrc/stable/library.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "../runtime/jit.hpp"
#include "../torch/tensor_checks.hpp"

namespace deep_gemm::ops {
namespace {

// What the kernels include from the compiler's own headers (cuda/deep_gemm/**):
// with NVRTC each must be in its include directories, checked before a compile
// so that a missing wheel is named instead of NVRTC's "cannot open source file".
const std::vector<std::string> kRequiredHeaders = {"cuda_bf16.h", "cuda/std/cstdint"};

// Called by deep_gemm/_jit.py at import: the include root inside the wheel and
// what Python found (NVRTC and header wheels); `backend` "" (automatic), "nvcc"
// or "nvrtc" (warmup picks the runtime's). Empty values keep the environment's
// choice (DG_JIT_* variables).
void jit_configure(std::string include_root, std::string nvrtc_library, std::vector<std::string> nvrtc_include_dirs,
                   std::string backend) {
  JitContext::get().set_include_root(std::move(include_root));
  auto cfg = deep_jit::RuntimeConfig::from_env();
  if (cfg.nvrtc_library.empty()) cfg.nvrtc_library = std::move(nvrtc_library);
  if (cfg.nvrtc_include_dirs.empty()) cfg.nvrtc_include_dirs = std::move(nvrtc_include_dirs);
  if (!backend.empty()) cfg.backend = std::move(backend);
  cfg.required_headers = kRequiredHeaders;
  deep_jit::Runtime::get().configure(std::move(cfg));
}

// Compiles (or finds in the cache) a kernel source; returns the cubin path.
std::string jit_build(std::string name, std::string code, std::string entry) {
  return deep_jit::Runtime::get().build(JitContext::get().source(std::move(name), std::move(code), std::move(entry)));
}

// A kernel of a DG_JIT_RECORD file, with deep_gemm's include root (a recording
// holds only that one): the cubin path, whether it was compiled (not a hit),
// the cache key and its digests [key, compiler, flags, includes], the backend
// and the compiler's version. For `python -m deep_gemm.warmup --from-record`.
std::tuple<std::string, bool, std::vector<std::string>, std::string, std::string> jit_build_recorded(
    std::string name, std::string code, std::string entry, std::string arch, std::string cpp_std, int64_t opt_level,
    bool line_info, std::vector<std::string> defines, std::vector<std::string> extra_flags) {
  auto src = JitContext::get().source(std::move(name), std::move(code), std::move(entry));
  src.options.arch = std::move(arch);
  src.options.cpp_std = std::move(cpp_std);
  src.options.opt_level = static_cast<int>(opt_level);
  src.options.line_info = line_info;
  src.options.defines = std::move(defines);
  src.options.extra_flags = std::move(extra_flags);
  auto r = deep_jit::Runtime::get().build_report(src);
  return {r.cubin_path, r.compiled, {r.key.key, r.key.compiler, r.key.flags, r.key.includes}, r.backend,
          r.compiler_version};
}

std::tuple<std::vector<std::string>, std::string, std::string, std::string, std::vector<std::string>, std::vector<int64_t>,
           std::string, std::vector<std::string>>
jit_info() {
  const auto info = deep_jit::Runtime::get().info();
  std::vector<int64_t> counters = {static_cast<int64_t>(info.kernels_loaded), static_cast<int64_t>(info.compiles),
                                   static_cast<int64_t>(info.compile_failures), static_cast<int64_t>(info.disk_hits),
                                   static_cast<int64_t>(info.repaired)};
  return {info.cache_roots, info.backend,      info.compiler_path, info.compiler_version,
          info.loaded_names, counters, info.selection, info.system_include_dirs};
}

// The doctor's end-to-end check: compiles a tiny kernel through the same path
// as the GEMMs (deep_gemm's include root and the compiler's CUDA and CCCL
// headers). Without `out` that is all (no GPU needed); with it (int32, CUDA,
// contiguous) the kernel is loaded and fills it with 3 * (i % 256) + 2 on
// torch's current stream. Returns the cubin's path.
std::string jit_selftest(std::optional<Tensor> out) {
  constexpr const char* op = "jit_selftest";
  static const char* kCode =
      "#include <deep_gemm/common/utils.cuh>\n"
      "#include <cuda_bf16.h>\n\n"
      "extern \"C\" __global__ void dg_selftest(int32_t* out, uint32_t n) {\n"
      "    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "    const float v = __bfloat162float(__float2bfloat16(static_cast<float>(i % 256u)));\n"
      "    if (i < n) out[i] = static_cast<int32_t>(v) * 3 + static_cast<int32_t>(deep_gemm::ceil_div(7u, 4u));\n"
      "}\n";
  auto src = JitContext::get().source("dg_selftest", kCode, "dg_selftest");
  if (!out) return deep_jit::Runtime::get().build(src);
  check_arg(out->is_cuda(), op, "out must be a CUDA tensor");
  check_arg(out->scalar_type() == ScalarType::Int, op, "out must be torch.int32, got ", dtype_name(out->scalar_type()));
  check_arg(out->is_contiguous() && out->numel() > 0 && out->numel() <= (1 << 20), op,
            "out must be contiguous with 1 to 2^20 elements, got ", out->numel());
  const auto& kernel = deep_jit::Runtime::get().load(src, out->get_device_index());
  const auto n = static_cast<uint32_t>(out->numel());
  deep_jit::LaunchConfig lc;
  lc.block[0] = 128;
  lc.grid[0] = (n + 127) / 128;
  deep_jit::launch(kernel, lc, static_cast<int32_t*>(out->data_ptr()), n);
  return kernel.cubin_path;
}

}  // namespace
}  // namespace deep_gemm::ops

STABLE_TORCH_LIBRARY_FRAGMENT(deep_gemm, m) {
  m.def("jit_configure(str include_root, str nvrtc_library, str[] nvrtc_include_dirs, str backend=\"\") -> ()");
  m.def("jit_build(str name, str code, str entry) -> str");
  m.def("jit_build_recorded(str name, str code, str entry, str arch, str cpp_std, int opt_level, bool line_info, "
        "str[] defines, str[] extra_flags) -> (str, bool, str[], str, str)");
  m.def("jit_info() -> (str[], str, str, str, str[], int[], str, str[])");
  m.def("jit_selftest(Tensor(a!)? out) -> str");
}

STABLE_TORCH_LIBRARY_IMPL(deep_gemm, CompositeExplicitAutograd, m) {
  using namespace deep_gemm::ops;
  m.impl("jit_configure", TORCH_BOX(&jit_configure));
  m.impl("jit_build", TORCH_BOX(&jit_build));
  m.impl("jit_build_recorded", TORCH_BOX(&jit_build_recorded));
  m.impl("jit_info", TORCH_BOX(&jit_info));
  m.impl("jit_selftest", TORCH_BOX(&jit_selftest));
}
