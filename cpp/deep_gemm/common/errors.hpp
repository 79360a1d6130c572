// Errors raised by deep_gemm ops. Torch turns a C++ exception thrown from a
// stable-ABI op into a Python RuntimeError carrying what(); the message names
// the op, the argument, what was expected and what was given (DESIGN.md 7).
#pragma once

#include <deep_jit/error.hpp>

#include <stdexcept>
#include <string>

namespace deep_gemm {

class ArgumentError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <class... Parts>
[[noreturn]] void fail_arg(const char* op, const Parts&... parts) {
  throw ArgumentError(deep_jit::detail::cat("deep_gemm.", op, ": ", parts...));
}

template <class... Parts>
inline void check_arg(bool ok, const char* op, const Parts&... parts) {
  if (!ok) [[unlikely]]
    fail_arg(op, parts...);
}

}  // namespace deep_gemm
