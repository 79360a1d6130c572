// deep_jit: the one exception type of the runtime, and small helpers to build
// its messages.
#pragma once

#include <charconv>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace deep_jit {

// Every failure in deep_jit is reported as this type. Messages are full
// sentences that name what failed (the file, the kernel, the driver call), so
// that a user seeing only the Python RuntimeError can act on it.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

inline std::string_view to_piece(std::string_view s) { return s; }
inline std::string_view to_piece(const std::string& s) { return s; }
inline std::string_view to_piece(const char* s) { return s ? std::string_view(s) : std::string_view("(null)"); }
inline std::string to_piece(char c) { return std::string(1, c); }

template <class Int>
  requires std::is_integral_v<Int> && (!std::is_same_v<Int, char>) && (!std::is_same_v<Int, bool>)
std::string to_piece(Int v) {
  return std::to_string(v);
}

inline std::string_view to_piece(bool b) { return b ? "true" : "false"; }

// Fixed two decimals; std::to_chars ignores the C locale, unlike printf.
inline std::string to_piece(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed, 2);
  return std::string(buf, res.ptr);
}

// Builds a message from pieces without iostreams (decision 5: no locale use).
template <class... Parts>
std::string cat(const Parts&... parts) {
  std::string out;
  (out.append(to_piece(parts)), ...);
  return out;
}

[[noreturn]] inline void fail(const std::string& message) { throw Error(message); }

}  // namespace detail
}  // namespace deep_jit
