// Argument helpers shared by the GEMM op families (ops/gemm.cpp, ops/grouped.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "../runtime/device_runtime.hpp"
#include "../torch/errors.hpp"

namespace deep_gemm::ops {

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Which of M, N, K are baked into the JIT kernel (API.md `compiled_dims`); all
// runtime arguments when set_ignore_compile_dims(True).
struct CompiledDims {
  bool m = false, n = false, k = false;
};

inline CompiledDims parse_compiled_dims(const std::string& dims, const char* op) {
  CompiledDims out;
  for (char ch : dims) {
    check_arg(ch == 'm' || ch == 'n' || ch == 'k', op, "compiled_dims may only contain 'm', 'n' and 'k', got '", dims,
              "'");
    (ch == 'm' ? out.m : ch == 'n' ? out.n : out.k) = true;
  }
  if (DeviceRuntime::get().ignore_compile_dims()) out = {};
  return out;
}

}  // namespace deep_gemm::ops
