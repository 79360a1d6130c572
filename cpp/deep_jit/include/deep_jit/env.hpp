// deep_jit: environment variables and the diagnostics switches they control.
#pragma once

#include <pwd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "error.hpp"

namespace deep_jit::detail {

// The value of `name`, or nothing when unset or empty (an empty variable is
// treated as unset so that `FOO= cmd` switches a default back on).
inline std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

// A boolean switch: unset or empty is off; 1/true/on/yes is on and
// 0/false/off/no is off (any case). Anything else is an Error naming the
// variable, so a typo cannot silently mean "on".
inline bool env_flag(const char* name) {
  auto v = env(name);
  if (!v) return false;
  std::string lower;
  for (char c : *v) lower.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
  if (lower == "1" || lower == "true" || lower == "on" || lower == "yes") return true;
  if (lower == "0" || lower == "false" || lower == "off" || lower == "no") return false;
  fail(cat("The environment variable ", name, " is set to '", *v,
           "', which is not a switch value; expected 1/0, true/false, on/off or yes/no (any case), "
           "or empty/unset for off."));
}

inline std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string_view::npos) end = s.size();
    if (end > start) parts.emplace_back(s.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

inline std::string home_dir() {
  if (auto h = env("HOME")) return *h;
  if (const passwd* pw = getpwuid(getuid()); pw && pw->pw_dir) return pw->pw_dir;
  fail("Cannot find a home directory for the JIT cache: HOME is unset and the user has no passwd entry; "
       "set DG_JIT_CACHE_DIR.");
}

// Diagnostic switches, read from the environment at each build so that a test
// can flip them without restarting the process.
struct Diagnostics {
  bool debug = false;           // DG_JIT_DEBUG: log each step to stderr
  bool print_command = false;   // DG_JIT_PRINT_COMPILER_COMMAND
  bool ptxas_verbose = false;   // DG_JIT_PTXAS_VERBOSE: ask ptxas for its report and print it
  bool ptxas_check = false;     // DG_JIT_PTXAS_CHECK: fail on spills, stack frame or local memory
  bool line_info = false;       // DG_JIT_WITH_LINEINFO
  bool dump_ptx = false;        // DG_JIT_DUMP_PTX
  bool dump_sass = false;       // DG_JIT_DUMP_SASS
  std::optional<std::string> cpp_std;  // DG_JIT_CPP_STANDARD, e.g. "c++17"

  // The ptxas report is needed whenever it is printed or checked.
  bool wants_ptxas_report() const { return ptxas_verbose || ptxas_check; }

  static Diagnostics from_env() {
    Diagnostics d;
    d.debug = env_flag("DG_JIT_DEBUG");
    d.print_command = env_flag("DG_JIT_PRINT_COMPILER_COMMAND");
    d.ptxas_verbose = env_flag("DG_JIT_PTXAS_VERBOSE");
    d.ptxas_check = env_flag("DG_JIT_PTXAS_CHECK");
    d.line_info = env_flag("DG_JIT_WITH_LINEINFO");
    d.dump_ptx = env_flag("DG_JIT_DUMP_PTX");
    d.dump_sass = env_flag("DG_JIT_DUMP_SASS");
    d.cpp_std = env("DG_JIT_CPP_STANDARD");
    return d;
  }
};

// One line to stderr, written with a single call so lines from concurrent
// threads or processes do not interleave mid-line.
inline void log_line(const std::string& line) {
  std::string out = line;
  out.push_back('\n');
  std::fwrite(out.data(), 1, out.size(), stderr);
  std::fflush(stderr);
}

inline void debug_log(const Diagnostics& d, const std::string& line) {
  if (d.debug) log_line("deep_jit: " + line);
}

}  // namespace deep_jit::detail
