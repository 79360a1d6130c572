// deep_jit: the plain data types of the public API.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <string>
#include <vector>

namespace deep_jit {

struct CompileOptions {
  std::string arch = "sm_90a";           // NVCC: -gencode=arch=compute_90a,code=sm_90a; NVRTC: --gpu-architecture=sm_90a
  std::string cpp_std = "c++20";         // DG_JIT_CPP_STANDARD overrides it
  int opt_level = 3;
  bool line_info = false;                // also forced on by DG_JIT_WITH_LINEINFO
  std::vector<std::string> include_dirs; // every one must exist; files under them are part of the cache key
  std::vector<std::string> defines;      // "NAME" or "NAME=VALUE"
  std::vector<std::string> extra_flags;  // appended as-is for the active backend
};

struct KernelSource {
  std::string name;    // human-readable; used in logs, errors and cache directory names
  std::string code;    // full CUDA C++ source defining `extern "C" __global__ void <entry>(...)`
  std::string entry;   // symbol of the kernel
  CompileOptions options;
};

struct RuntimeConfig {
  std::vector<std::string> cache_roots;        // searched in order; misses are written to the first
  std::string backend;                         // "nvcc" | "nvrtc" | "" (auto)
  std::string nvcc_path;                       // "" = detect
  std::string nvrtc_library;                   // "" = detect
  std::vector<std::string> nvrtc_include_dirs; // "" = derived from the NVRTC library's location
  bool quiet = false;                          // silences the "compiled X in N s" line
  // Headers (e.g. "cuda/std/cstdint") the kernels include from the compiler's
  // own header directories: with NVRTC, a missing one is an Error naming the
  // wheel that provides it, raised before any compile.
  std::vector<std::string> required_headers;
  std::string record_path;                     // DG_JIT_RECORD: append each kernel built or loaded (record.hpp)

  // The configuration the environment asks for (DG_JIT_CACHE_DIR,
  // DG_JIT_USE_NVRTC, DG_JIT_NVCC_COMPILER, DG_JIT_NVRTC_LIBRARY,
  // DG_JIT_NVRTC_INCLUDE_DIRS, DG_JIT_QUIET, DG_JIT_RECORD). Defined in runtime.hpp.
  static RuntimeConfig from_env();
};

namespace detail {
// An atomic that can be copied (as a snapshot), so Kernel stays a plain,
// copyable aggregate while launch() records state on it lock-free.
struct CopyableAtomicU32 {
  std::atomic<unsigned> value{0};
  CopyableAtomicU32() = default;
  CopyableAtomicU32(const CopyableAtomicU32& o) : value(o.value.load(std::memory_order_relaxed)) {}
  CopyableAtomicU32& operator=(const CopyableAtomicU32& o) {
    value.store(o.value.load(std::memory_order_relaxed), std::memory_order_relaxed);
    return *this;
  }
};
}  // namespace detail

struct Kernel {
  CUfunction function = nullptr;
  CUmodule module = nullptr;
  int device = -1;
  std::string name;
  std::string cubin_path;
  CUcontext context = nullptr;  // the device's primary context, which owns `module`
  // The dynamic shared memory limit already set on `function` (launch() raises it on demand).
  mutable detail::CopyableAtomicU32 max_dynamic_smem_set;
};

struct LaunchConfig {
  unsigned grid[3]{1, 1, 1};
  unsigned block[3]{1, 1, 1};
  unsigned shared_bytes = 0;
  unsigned cluster_dim = 1;  // cluster along x; grid[0] must be a multiple of it
  bool pdl = false;          // programmatic dependent launch
  CUstream stream = nullptr; // nullptr => the registered stream provider's stream (or the legacy default stream)
};

struct JitInfo {
  std::vector<std::string> cache_roots;
  std::string backend, compiler_path, compiler_version;
  std::string selection;                         // why this backend, and where the compiler was found
  std::vector<std::string> system_include_dirs;  // the backend's own header directories (NVRTC's)
  size_t kernels_loaded = 0;
  std::vector<std::string> loaded_names;
  // Counters for this process, for tests and diagnostics.
  size_t compiles = 0;        // compiler invocations that produced a published cubin
  size_t compile_failures = 0;
  size_t disk_hits = 0;       // build() calls answered by a valid cache entry
  size_t repaired = 0;        // corrupt entries detected and removed
};

}  // namespace deep_jit
