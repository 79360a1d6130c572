// deep_jit: what the cache needs from a compiler backend, and the ptxas report
// check shared by both backends.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "env.hpp"
#include "error.hpp"
#include "types.hpp"

namespace deep_jit::detail {

// One compilation, set up by the cache in a private work directory.
struct CompileRequest {
  const KernelSource* source = nullptr;
  std::vector<std::string> flags;  // from Compiler::flags(); the part of the command in the cache key
  std::string work_dir;            // private; the cache publishes it by rename when we succeed
  std::string source_path;         // <work_dir>/kernel.cu, already written
  std::string cubin_path;          // <work_dir>/kernel.cubin, to be produced
  Diagnostics diag;
};

struct CompileResult {
  bool ok = false;
  std::string log;      // everything the compiler said
  std::string command;  // the command line, for humans
  std::string status;   // e.g. "exited with code 1"; empty on success
};

class Compiler {
 public:
  virtual ~Compiler() = default;
  virtual const std::string& backend() const = 0;   // "nvcc" or "nvrtc"
  virtual const std::string& path() const = 0;      // nvcc binary or libnvrtc file
  virtual const std::string& version() const = 0;   // full version text, for humans
  // What names this compiler build in the cache key: its version text (nvcc's
  // includes the build id), never its path, so two installs of one toolkit
  // share entries.
  virtual std::string identity() const = 0;
  virtual std::string short_version() const { return version(); }  // one line, for messages and manifests
  // Header directories the backend passes itself (NVRTC's): their paths are
  // left out of the key, their version headers are in identity().
  virtual std::vector<std::string> system_include_dirs() const { return {}; }
  // Flags for these options; everything that can change the cubin must be here.
  virtual std::vector<std::string> flags(const CompileOptions& opts, const Diagnostics& diag) const = 0;
  virtual CompileResult compile(const CompileRequest& req) const = 0;

  // Why this compiler was chosen and where it was found, for get_jit() and the doctor.
  const std::string& origin() const { return origin_; }
  void set_origin(std::string origin) { origin_ = std::move(origin); }

 private:
  std::string origin_;
};

// "sm_90a" -> "90a". Rejects anything else so a typo cannot reach the compiler.
inline std::string arch_number(const std::string& arch) {
  if (arch.size() < 5 || arch.compare(0, 3, "sm_") != 0 ||
      arch.find_first_not_of("0123456789abcdefghijklmnopqrstuvwxyz", 3) != std::string::npos)
    fail(cat("The GPU architecture '", arch, "' is not of the form sm_<number>[suffix], e.g. sm_90a."));
  return arch.substr(3);
}

inline std::string effective_cpp_std(const CompileOptions& opts, const Diagnostics& diag) {
  return diag.cpp_std ? *diag.cpp_std : opts.cpp_std;
}

// Sums of the resource figures in a ptxas -v report.
struct PtxasUsage {
  long long stack_frame = 0;
  long long spill_stores = 0;
  long long spill_loads = 0;
  long long local_memory = 0;  // "N bytes lmem"
  bool found_report = false;

  bool clean() const { return stack_frame == 0 && spill_stores == 0 && spill_loads == 0 && local_memory == 0; }
};

// Largest integer written right before each occurrence of `suffix` in `text`
// (e.g. "24 bytes spill stores" with suffix " bytes spill stores").
inline long long max_number_before(std::string_view text, std::string_view suffix, bool* found) {
  long long best = 0;
  for (size_t at = text.find(suffix); at != std::string_view::npos; at = text.find(suffix, at + 1)) {
    size_t begin = at;
    while (begin > 0 && text[begin - 1] >= '0' && text[begin - 1] <= '9') --begin;
    if (begin == at) continue;
    long long v = 0;
    for (size_t i = begin; i < at && v < (1LL << 50); ++i) v = v * 10 + (text[i] - '0');
    best = v > best ? v : best;
    *found = true;
  }
  return best;
}

inline PtxasUsage parse_ptxas_report(std::string_view log) {
  PtxasUsage u;
  u.stack_frame = max_number_before(log, " bytes stack frame", &u.found_report);
  u.spill_stores = max_number_before(log, " bytes spill stores", &u.found_report);
  u.spill_loads = max_number_before(log, " bytes spill loads", &u.found_report);
  bool unused = false;
  u.local_memory = max_number_before(log, " bytes lmem", &unused);
  return u;
}

// Empty when the report is clean; otherwise the reason DG_JIT_PTXAS_CHECK fails.
inline std::string ptxas_check_failure(std::string_view log) {
  PtxasUsage u = parse_ptxas_report(log);
  if (!u.found_report) return "the ptxas report (-v) was not found in the compiler output";
  if (u.clean()) return "";
  return cat("ptxas reports a stack frame of ", u.stack_frame, " bytes, ", u.spill_stores, " bytes of spill stores, ",
             u.spill_loads, " bytes of spill loads and ", u.local_memory, " bytes of local memory (all must be 0)");
}

}  // namespace deep_jit::detail
