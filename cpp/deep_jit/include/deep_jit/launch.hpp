// deep_jit: launching a loaded kernel with cuLaunchKernelEx.
#pragma once

#include <atomic>
#include <string>

#include "driver.hpp"
#include "error.hpp"
#include "types.hpp"

namespace deep_jit {

// Returns the stream to launch on when LaunchConfig::stream is null. The torch
// glue registers one that returns torch's current stream for the device.
using StreamProvider = CUstream (*)(int device);

namespace detail {

inline std::atomic<StreamProvider>& stream_provider_slot() {
  static std::atomic<StreamProvider> slot{nullptr};
  return slot;
}

inline constexpr unsigned kDefaultSharedLimit = 48 * 1024;

inline std::string describe_launch(const Kernel& k, const LaunchConfig& c) {
  return cat("kernel ", k.name, " (grid ", c.grid[0], "x", c.grid[1], "x", c.grid[2], ", block ", c.block[0], "x",
             c.block[1], "x", c.block[2], ", ", c.shared_bytes, " bytes of shared memory, cluster ", c.cluster_dim,
             c.pdl ? ", PDL" : "", ")");
}

// Launch arguments that would only produce an opaque driver error.
inline void check_launch_config(const Kernel& k, const LaunchConfig& c) {
  if (!k.function) fail(cat("Cannot launch kernel ", k.name, ": it was not loaded."));
  for (int i = 0; i < 3; ++i)
    if (c.grid[i] == 0 || c.block[i] == 0) fail(cat("Cannot launch ", describe_launch(k, c), ": a dimension is 0."));
  if (static_cast<unsigned long long>(c.block[0]) * c.block[1] * c.block[2] > 1024)
    fail(cat("Cannot launch ", describe_launch(k, c), ": a block may have at most 1024 threads."));
  if (c.cluster_dim == 0 || c.grid[0] % c.cluster_dim != 0)
    fail(cat("Cannot launch ", describe_launch(k, c), ": grid x must be a positive multiple of the cluster size."));
}

// Raises the kernel's dynamic shared memory limit when a launch needs more
// than the default 48 KiB; done once per kernel and size, not per launch.
inline void ensure_shared_limit(const Kernel& k, const LaunchConfig& c) {
  if (c.shared_bytes <= kDefaultSharedLimit) return;
  auto& done = k.max_dynamic_smem_set.value;
  if (done.load(std::memory_order_acquire) >= c.shared_bytes) return;
  int optin = device_info(k.device).max_shared_optin;
  if (c.shared_bytes > static_cast<unsigned>(optin))
    fail(cat("Cannot launch ", describe_launch(k, c), ": device ", k.device, " allows at most ", optin,
             " bytes of dynamic shared memory per block."));
  check(driver().func_set_attribute(k.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                    static_cast<int>(c.shared_bytes)),
        "cuFuncSetAttribute", cat("raising the shared memory limit of kernel ", k.name));
  done.store(c.shared_bytes, std::memory_order_release);
}

// Makes the kernel's context current for the launch when the thread has a
// different one (torch keeps the device's primary context current, so this is
// normally one cuCtxGetCurrent call).
class LaunchContext {
 public:
  explicit LaunchContext(const Kernel& k) {
    CUcontext current = nullptr;
    driver().ctx_get_current(&current);
    if (current == k.context || k.context == nullptr) return;
    if (current == nullptr) {
      check(driver().ctx_set_current(k.context), "cuCtxSetCurrent", cat("preparing to launch kernel ", k.name));
      return;
    }
    check(driver().ctx_push_current(k.context), "cuCtxPushCurrent", cat("preparing to launch kernel ", k.name));
    pushed_ = true;
  }
  ~LaunchContext() {
    CUcontext popped = nullptr;
    if (pushed_) driver().ctx_pop_current(&popped);
  }
  LaunchContext(const LaunchContext&) = delete;
  LaunchContext& operator=(const LaunchContext&) = delete;

 private:
  bool pushed_ = false;
};

}  // namespace detail

inline void set_stream_provider(StreamProvider provider) {
  detail::stream_provider_slot().store(provider, std::memory_order_release);
}

// Launches `k` with `args` (an array of pointers to each kernel argument, as
// cuLaunchKernel takes them). Thread-safe; usable under CUDA graph capture.
inline void launch(const Kernel& k, const LaunchConfig& cfg, void** args) {
  detail::check_launch_config(k, cfg);
  const detail::DriverApi& api = detail::driver();
  detail::LaunchContext context(k);
  detail::ensure_shared_limit(k, cfg);

  CUlaunchAttribute attrs[2] = {};
  unsigned num_attrs = 0;
  if (cfg.cluster_dim > 1) {
    attrs[num_attrs].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[num_attrs].value.clusterDim.x = cfg.cluster_dim;
    attrs[num_attrs].value.clusterDim.y = 1;
    attrs[num_attrs].value.clusterDim.z = 1;
    ++num_attrs;
  }
  if (cfg.pdl) {
    attrs[num_attrs].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attrs[num_attrs].value.programmaticStreamSerializationAllowed = 1;
    ++num_attrs;
  }

  CUlaunchConfig lc = {};
  lc.gridDimX = cfg.grid[0];
  lc.gridDimY = cfg.grid[1];
  lc.gridDimZ = cfg.grid[2];
  lc.blockDimX = cfg.block[0];
  lc.blockDimY = cfg.block[1];
  lc.blockDimZ = cfg.block[2];
  lc.sharedMemBytes = cfg.shared_bytes;
  lc.hStream = cfg.stream;
  if (!lc.hStream) {
    StreamProvider provider = detail::stream_provider_slot().load(std::memory_order_acquire);
    if (provider) lc.hStream = provider(k.device);
  }
  lc.attrs = num_attrs ? attrs : nullptr;
  lc.numAttrs = num_attrs;

  CUresult r = api.launch_kernel_ex(&lc, k.function, args, nullptr);
  if (r != CUDA_SUCCESS)
    detail::fail(detail::cat("Launching ", detail::describe_launch(k, cfg), " failed: ", detail::describe(r), "."));
}

// Packs the addresses of `a...` and launches. Arguments are passed by value to
// the kernel, so their types must match the kernel's parameters exactly.
template <class... A>
void launch(const Kernel& k, const LaunchConfig& c, const A&... a) {
  if constexpr (sizeof...(A) == 0) {
    launch(k, c, static_cast<void**>(nullptr));
  } else {
    void* args[] = {const_cast<void*>(static_cast<const void*>(&a))...};
    launch(k, c, args);
  }
}

}  // namespace deep_jit
