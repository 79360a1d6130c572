// What every kernel family's launcher shares: the kernel cache (key -> configuration and
// loaded kernel, the slow path that plans, compiles or loads, and the SM90 check), tensor-map
// encoding from the specs of launch/sm90_source.hpp, the persistent-grid launch
// configuration (of any family's config, a heuristics::Sm90GemmConfig), and the
// parsing of the tuning knobs. A family's launcher is then its key, its plan (configuration
// and JIT source, also what warmup builds without a GPU) and its argument packing.
#pragma once

#include <deep_jit/deep_jit.hpp>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include "../heuristics/sm90_common.hpp"
#include "../runtime/device_runtime.hpp"
#include "../runtime/jit.hpp"
#include "sm90_source.hpp"

namespace deep_gemm::launch {

namespace h = deep_gemm::heuristics;

// A planned kernel: the configuration the heuristics chose and the JIT source built for it.
template <class Config>
struct Plan {
  Config cfg;
  deep_jit::KernelSource src;
};

namespace detail {

// The hash of a key made of small integers (a family key's fields, in order).
inline size_t hash_fields(std::initializer_list<int> fields) {
  size_t h = 0;
  for (int v : fields) h = h * 1000003u ^ std::hash<int>()(v);
  return h;
}

// DG_PRINT_CONFIGS=1: one line per kernel a launcher chooses, on its first use.
inline bool print_configs() {
  static const bool on = deep_jit::detail::env_flag("DG_PRINT_CONFIGS");
  return on;
}

// Developer knobs are named DG_DEV_*; a variable still set under the knob's old name (without
// "DEV_") would silently do nothing, so it fails loudly.
inline void refuse_old_knob_name(const char* name) {
  const std::string s(name);
  if (s.rfind("DG_DEV_", 0) != 0) return;
  const std::string old = "DG_" + s.substr(7);
  if (const char* v = std::getenv(old.c_str()); v && *v)
    throw std::runtime_error("deep_gemm: " + old + " is now named " + s + " (a developer knob); rename it");
}

// A tuning knob: the integer value of environment variable `name`, or 0 when unset. A value
// that is not a short decimal number or that `accepts` rejects fails loudly, naming what
// was `expected`. Callers read it once per process (a function-local static).
inline int env_int_knob(const char* name, bool (*accepts)(int), const char* expected) {
  refuse_old_knob_name(name);
  const char* v = std::getenv(name);
  if (!v || !*v) return 0;
  const std::string s(v);
  const bool digits = s.size() <= 3 && s.find_first_not_of("0123456789") == std::string::npos;
  const int value = digits ? std::stoi(s) : -1;
  if (!accepts(value))
    throw std::runtime_error(std::string("deep_gemm: ") + name + " must be " + expected + ", got '" + s + "'");
  return value;
}

// A 0/1 knob whose unset value is `unset`.
inline bool env_bool_knob(const char* name, bool unset) {
  refuse_old_knob_name(name);
  const char* v = std::getenv(name);
  if (!v || !*v) return unset;
  return env_int_knob(name, [](int x) { return x == 0 || x == 1; }, "0 or 1") == 1;
}

// A 0/1 knob that overrides a rule: 0 or 1 where set, -1 where unset (the rule decides).
inline int env_override_knob(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? static_cast<int>(env_bool_knob(name, false)) : -1;
}

// What an env_override_knob value makes of a rule's answer: set, the knob (1 only where
// `allowed`); unset (-1), the rule.
inline bool knob_or_rule(int knob, bool allowed, bool rule) { return knob >= 0 ? knob == 1 && allowed : rule; }

inline CUtensorMapDataType tma_dtype(Sm90TmaDtype t) {
  switch (t) {
    case Sm90TmaDtype::kU8: return CU_TENSOR_MAP_DATA_TYPE_UINT8;
    case Sm90TmaDtype::kF32: return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    case Sm90TmaDtype::kBF16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  }
  return CU_TENSOR_MAP_DATA_TYPE_UINT8;
}

inline CUtensorMapSwizzle tma_swizzle(int bytes) {
  switch (bytes) {
    case 32: return CU_TENSOR_MAP_SWIZZLE_32B;
    case 64: return CU_TENSOR_MAP_SWIZZLE_64B;
    case 128: return CU_TENSOR_MAP_SWIZZLE_128B;
    default: return CU_TENSOR_MAP_SWIZZLE_NONE;
  }
}

}  // namespace detail

// One tensor map of a launch, from its spec and the operand's device pointer.
inline CUtensorMap encode_tensor_map(const Sm90TensorMapSpec& s, const void* base) {
  if (s.batch_elems == 0)
    return deep_jit::make_tensor_map_2d(base, detail::tma_dtype(s.dtype), s.inner_elems, s.outer_elems,
                                        s.outer_stride_bytes, s.box_inner, s.box_outer,
                                        detail::tma_swizzle(s.swizzle_bytes));
  deep_jit::TensorMapSpec t;
  t.base = base;
  t.dtype = detail::tma_dtype(s.dtype);
  t.rank = 3;
  t.dims[0] = s.inner_elems;
  t.dims[1] = s.outer_elems;
  t.dims[2] = s.batch_elems;
  t.strides_bytes[0] = s.outer_stride_bytes;
  t.strides_bytes[1] = s.batch_stride_bytes;
  t.box[0] = s.box_inner;
  t.box[1] = s.box_outer;
  t.box[2] = 1;
  t.swizzle = detail::tma_swizzle(s.swizzle_bytes);
  return deep_jit::make_tensor_map(t);
}

// The launch of a persistent kernel of configuration `cfg` (grid, block, shared memory,
// cluster) on torch's current stream; `pdl`: programmatic dependent launch.
inline deep_jit::LaunchConfig persistent_launch(const h::Sm90GemmConfig& cfg, bool pdl) {
  deep_jit::LaunchConfig lc;
  lc.grid[0] = static_cast<unsigned>(cfg.grid_x);
  lc.block[0] = static_cast<unsigned>(cfg.num_threads);
  lc.shared_bytes = static_cast<unsigned>(cfg.smem_bytes);
  lc.cluster_dim = static_cast<unsigned>(cfg.cluster);
  lc.pdl = pdl;
  return lc;
}

// The device's properties, after checking it is an SM90 (Hopper) GPU: the error names `op`.
inline const deep_jit::DeviceInfo& require_sm90(int device, const char* op) {
  const auto& dev = deep_jit::device_info(device);
  check_arg(dev.cc_major == 9, op, "this kernel needs an SM90 (Hopper) GPU; device ", device, " (", dev.name,
            ") is sm_", dev.cc_major, dev.cc_minor);
  return dev;
}

// The kernels of one family, by key (everything that changes the configuration or the code;
// `Key::hash()` and `operator==`). A repeated call is a hash-map lookup under a mutex; the
// first call of a key plans (heuristics and JIT source), compiles or loads the cubin (no
// lock held meanwhile, so other keys proceed; deep_jit dedups concurrent builds), and with
// DG_PRINT_CONFIGS prints `describe(cfg)`.
template <class Key, class Config>
class KernelCache {
 public:
  struct Entry {
    Config cfg;
    const deep_jit::Kernel* kernel;
  };

  // plan(key, max_smem_bytes) -> Plan<Config>; describe(cfg) -> std::string.
  template <class PlanFn, class DescribeFn>
  const Entry& get(const Key& key, int device, const char* op, PlanFn&& plan, DescribeFn&& describe) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = entries_.find(key); it != entries_.end()) return it->second;
    }
    const auto& dev = require_sm90(device, op);
    Plan<Config> planned = plan(key, dev.max_shared_optin);
    Entry e{planned.cfg, &deep_jit::Runtime::get().load(planned.src, device)};
    if (detail::print_configs()) deep_jit::detail::log_line("deep_gemm: " + describe(e.cfg));
    std::lock_guard<std::mutex> lock(mu_);
    return entries_.try_emplace(key, e).first->second;
  }

 private:
  struct Hash {
    size_t operator()(const Key& k) const { return k.hash(); }
  };
  std::mutex mu_;
  std::unordered_map<Key, Entry, Hash> entries_;
};

// A kernel without configurations (a layout kernel): loaded once per device on first use,
// then a lock-free read.
class PerDeviceKernel {
 public:
  // source() -> deep_jit::KernelSource, called on a device's first use only.
  template <class SourceFn>
  const deep_jit::Kernel& get(int device, const char* op, SourceFn&& source) {
    check_arg(device >= 0 && device < kMaxDevices, op, "device index ", device, " out of range");
    if (const auto* k = kernels_[device].load(std::memory_order_acquire)) return *k;
    std::lock_guard<std::mutex> lock(mu_);
    if (!kernels_[device].load(std::memory_order_relaxed))
      kernels_[device].store(&deep_jit::Runtime::get().load(source(), device), std::memory_order_release);
    return *kernels_[device].load(std::memory_order_relaxed);
  }

 private:
  static constexpr int kMaxDevices = 64;
  std::mutex mu_;
  std::array<std::atomic<const deep_jit::Kernel*>, kMaxDevices> kernels_{};
};

}  // namespace deep_gemm::launch
