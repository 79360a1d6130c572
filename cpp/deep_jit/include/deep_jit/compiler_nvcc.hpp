// deep_jit: the NVCC backend (a toolkit's nvcc, run as a child process).
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "compiler.hpp"
#include "env.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "process.hpp"

namespace deep_jit::detail {

// An nvcc found, and by which rule (for get_jit() and the doctor).
struct FoundNvcc {
  std::string path;    // as found
  std::string origin;  // "DG_JIT_NVCC_COMPILER", "CUDA_HOME", "CUDA_PATH", "PATH", "/usr/local/cuda"
};

// Where nvcc is, in the documented order. DG_JIT_NVCC_COMPILER and CUDA_HOME
// are explicit requests: when set but wrong they are an Error rather than
// silently skipped. CUDA_PATH, PATH and /usr/local/cuda are guesses.
// An empty path when nothing was found.
inline FoundNvcc locate_nvcc() {
  if (auto explicit_path = env("DG_JIT_NVCC_COMPILER")) {
    if (!is_executable_file(*explicit_path))
      fail(cat("DG_JIT_NVCC_COMPILER is set to ", *explicit_path, ", which is not an executable file."));
    return {*explicit_path, "DG_JIT_NVCC_COMPILER"};
  }
  if (auto home = env("CUDA_HOME")) {
    std::string candidate = join_path(*home, "bin/nvcc");
    if (!is_executable_file(candidate))
      fail(cat("CUDA_HOME is set to ", *home, " but ", candidate,
               " is not an executable nvcc; fix CUDA_HOME, unset it, or set DG_JIT_USE_NVRTC=1."));
    return {candidate, "CUDA_HOME"};
  }
  if (auto cuda_path = env("CUDA_PATH")) {
    std::string candidate = join_path(*cuda_path, "bin/nvcc");
    if (is_executable_file(candidate)) return {candidate, "CUDA_PATH"};
  }
  if (std::string on_path = find_in_path("nvcc"); !on_path.empty()) return {on_path, "PATH"};
  if (is_executable_file("/usr/local/cuda/bin/nvcc")) return {"/usr/local/cuda/bin/nvcc", "/usr/local/cuda"};
  return {};
}

inline std::string find_nvcc() { return locate_nvcc().path; }

// The host compiler nvcc will run, or "" when it has none: nvcc preprocesses
// every source with it ("gcc" on PATH unless NVCC_CCBIN or -ccbin in
// NVCC_PREPEND_FLAGS / NVCC_APPEND_FLAGS says otherwise) and fails without it.
inline std::string nvcc_host_compiler() {
  if (auto ccbin = env("NVCC_CCBIN")) return *ccbin;
  for (const char* var : {"NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"})
    if (auto flags = env(var); flags && (flags->find("-ccbin") != std::string::npos ||
                                          flags->find("--compiler-bindir") != std::string::npos))
      return cat("(", var, ")");
  return find_in_path("gcc");
}

// "release 13.0, V13.0.88" from `nvcc --version`, for humans.
inline std::string short_nvcc_version(const std::string& text) {
  size_t at = text.find("release ");
  if (at == std::string::npos) return "unknown";
  size_t end = text.find('\n', at);
  return text.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

class NvccCompiler final : public Compiler {
 public:
  // Runs nvcc through its real path: /usr/local/cuda/bin/nvcc and
  // /usr/local/cuda-13.0/bin/nvcc are one compiler (the key holds neither).
  explicit NvccCompiler(const std::string& nvcc_path) : path_(canonical_path(nvcc_path)) {
    if (!is_executable_file(path_)) fail(cat("The NVCC compiler ", nvcc_path, " is not an executable file."));
    ProcessResult r = run_process({path_, "--version"});
    if (!r.ok())
      fail(cat("Running '", path_, " --version' failed: it ", r.status_text(), ". Output:\n", r.output));
    version_ = r.output;
    while (!version_.empty() && (version_.back() == '\n' || version_.back() == '\r')) version_.pop_back();
    short_version_ = short_nvcc_version(version_);
  }

  const std::string& backend() const override { return backend_; }
  const std::string& path() const override { return path_; }
  const std::string& version() const override { return version_; }
  std::string short_version() const override { return short_version_; }
  std::string identity() const override { return version_; }

  std::vector<std::string> flags(const CompileOptions& opts, const Diagnostics& diag) const override {
    std::string arch = arch_number(opts.arch);
    std::vector<std::string> f = {
        "-std=" + effective_cpp_std(opts, diag),
        "-O" + std::to_string(opts.opt_level),
        "--expt-relaxed-constexpr",
        "-gencode=arch=compute_" + arch + ",code=sm_" + arch,
    };
    if (opts.opt_level != 3) f.push_back("-Xptxas=-O" + std::to_string(opts.opt_level));
    for (const auto& dir : opts.include_dirs) f.push_back("-I" + dir);
    for (const auto& def : opts.defines) f.push_back("-D" + def);
    if (opts.line_info || diag.line_info) f.push_back("-lineinfo");
    if (diag.wants_ptxas_report()) f.push_back("-Xptxas=-v");
    // --keep writes intermediates (the .ptx among them); it does not change the
    // cubin, but keeping it in the key makes a dump request compile afresh.
    if (diag.dump_ptx) f.push_back("--keep");
    f.insert(f.end(), opts.extra_flags.begin(), opts.extra_flags.end());
    return f;
  }

  CompileResult compile(const CompileRequest& req) const override {
    std::vector<std::string> argv = {path_};
    std::string keep_dir = join_path(req.work_dir, "nvcc-keep");
    for (const auto& flag : req.flags) {
      argv.push_back(flag);
      if (flag == "--keep") {
        make_dirs(keep_dir, "NVCC intermediate directory");
        argv.push_back("--keep-dir");
        argv.push_back(keep_dir);
      }
    }
    argv.insert(argv.end(), {"-cubin", "-o", req.cubin_path, req.source_path});
    CompileResult result;
    result.command = command_line(argv);
    if (req.diag.print_command) log_line("deep_jit: " + result.command);
    // The pid file lets a later build reap this compiler if we are killed (see remove_stale_temps).
    ProcessResult pr = run_process(argv, join_path(req.work_dir, "compiler.pid"));
    result.log = pr.output;
    result.ok = pr.ok();
    if (!result.ok) result.status = "nvcc " + pr.status_text();
    if (req.diag.dump_ptx) collect_ptx(keep_dir, join_path(req.work_dir, "kernel.ptx"));
    return result;
  }

 private:
  // Moves the kept .ptx next to the cubin and drops the other intermediates.
  static void collect_ptx(const std::string& keep_dir, const std::string& target) {
    for (const auto& name : list_dir(keep_dir)) {
      if (name.size() > 4 && name.compare(name.size() - 4, 4, ".ptx") == 0) {
        std::rename(join_path(keep_dir, name).c_str(), target.c_str());
        break;
      }
    }
    remove_tree(keep_dir);
  }

  std::string backend_ = "nvcc";
  std::string path_;
  std::string version_;
  std::string short_version_;
};

}  // namespace deep_jit::detail
