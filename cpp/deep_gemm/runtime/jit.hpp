// deep_gemm's use of deep_jit: where the kernel headers are (the JIT include
// root installed with the wheel) and the one-time wiring of torch's stream.
#pragma once

#include <deep_jit/deep_jit.hpp>

#include <mutex>
#include <string>

#include "../torch/stream.hpp"

namespace deep_gemm {

class JitContext {
 public:
  static JitContext& get() {
    static JitContext ctx;
    return ctx;
  }

  // Set once by the Python side at import (deep_gemm/include).
  void set_include_root(std::string root) {
    std::lock_guard<std::mutex> lock(mu_);
    include_root_ = std::move(root);
  }
  std::string include_root() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (include_root_.empty())
      throw std::runtime_error("deep_gemm: the JIT include root is not set (import deep_gemm through Python first)");
    return include_root_;
  }

  // A kernel source with deep_gemm's standard options.
  deep_jit::KernelSource source(std::string name, std::string code, std::string entry) const {
    deep_jit::KernelSource src;
    src.name = std::move(name);
    src.code = std::move(code);
    src.entry = std::move(entry);
    src.options.include_dirs = {include_root()};
    return src;
  }

 private:
  JitContext() { deep_jit::set_stream_provider(&torch_current_stream); }

  mutable std::mutex mu_;
  std::string include_root_;
};

}  // namespace deep_gemm
