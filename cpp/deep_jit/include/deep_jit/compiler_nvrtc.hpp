// deep_jit: the NVRTC backend (libnvrtc, loaded with dlopen, in process).
//
// This is the pip-only path (decision 4): libnvrtc from the nvidia-cuda-nvrtc
// wheel and CUDA headers from the nvidia-cuda-runtime and nvidia-cuda-cccl
// wheels, or the same pieces from a toolkit.
#pragma once

#include <dlfcn.h>
#include <sys/stat.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "compiler.hpp"
#include "env.hpp"
#include "fork.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "hash.hpp"
#include "process.hpp"

namespace deep_jit::detail {

struct NvrtcProgramOpaque;
using NvrtcProgram = NvrtcProgramOpaque*;
using NvrtcResult = int;  // nvrtcResult; 0 is NVRTC_SUCCESS

// The entry points we use, resolved with dlsym from one libnvrtc file.
struct NvrtcApi {
  const char* (*get_error_string)(NvrtcResult) = nullptr;
  NvrtcResult (*version)(int*, int*) = nullptr;
  NvrtcResult (*create_program)(NvrtcProgram*, const char*, const char*, int, const char* const*,
                                const char* const*) = nullptr;
  NvrtcResult (*destroy_program)(NvrtcProgram*) = nullptr;
  NvrtcResult (*compile_program)(NvrtcProgram, int, const char* const*) = nullptr;
  NvrtcResult (*get_program_log_size)(NvrtcProgram, size_t*) = nullptr;
  NvrtcResult (*get_program_log)(NvrtcProgram, char*) = nullptr;
  NvrtcResult (*get_cubin_size)(NvrtcProgram, size_t*) = nullptr;
  NvrtcResult (*get_cubin)(NvrtcProgram, char*) = nullptr;
  NvrtcResult (*get_ptx_size)(NvrtcProgram, size_t*) = nullptr;
  NvrtcResult (*get_ptx)(NvrtcProgram, char*) = nullptr;
  int major = 0;
  int minor = 0;
};

template <class Fn>
void nvrtc_symbol(void* lib, const std::string& path, Fn& out, const char* name) {
  out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!out) fail(cat("The NVRTC library ", path, " does not export ", name, "; it is not a usable libnvrtc."));
}

// libnvrtc dlopens libnvrtc-builtins.so.<major>.<minor> by bare name, which
// the loader does not find in a wheel's folder. Loading it first, globally,
// from libnvrtc's own folder makes that lookup succeed.
inline void preload_nvrtc_builtins(const std::string& lib_dir, int major, int minor) {
  std::string exact = join_path(lib_dir, cat("libnvrtc-builtins.so.", major, ".", minor));
  std::string chosen = is_file(exact) ? exact : "";
  if (chosen.empty()) {
    for (const auto& name : list_dir(lib_dir))
      if (name.rfind("libnvrtc-builtins.so", 0) == 0) chosen = join_path(lib_dir, name);
  }
  if (!chosen.empty()) dlopen(chosen.c_str(), RTLD_NOW | RTLD_GLOBAL);
}

inline std::unique_ptr<NvrtcApi> load_nvrtc(const std::string& path) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    fail(cat("Cannot load the NVRTC library ", path, ": ", why ? why : "unknown reason", "."));
  }
  auto api = std::make_unique<NvrtcApi>();
  nvrtc_symbol(lib, path, api->get_error_string, "nvrtcGetErrorString");
  nvrtc_symbol(lib, path, api->version, "nvrtcVersion");
  nvrtc_symbol(lib, path, api->create_program, "nvrtcCreateProgram");
  nvrtc_symbol(lib, path, api->destroy_program, "nvrtcDestroyProgram");
  nvrtc_symbol(lib, path, api->compile_program, "nvrtcCompileProgram");
  nvrtc_symbol(lib, path, api->get_program_log_size, "nvrtcGetProgramLogSize");
  nvrtc_symbol(lib, path, api->get_program_log, "nvrtcGetProgramLog");
  nvrtc_symbol(lib, path, api->get_cubin_size, "nvrtcGetCUBINSize");
  nvrtc_symbol(lib, path, api->get_cubin, "nvrtcGetCUBIN");
  nvrtc_symbol(lib, path, api->get_ptx_size, "nvrtcGetPTXSize");
  nvrtc_symbol(lib, path, api->get_ptx, "nvrtcGetPTX");
  if (api->version(&api->major, &api->minor) != 0)
    fail(cat("nvrtcVersion failed in the NVRTC library ", path, "."));
  preload_nvrtc_builtins(parent_dir(path), api->major, api->minor);
  return api;
}

// One loaded library per path for the life of the process (never dlclosed:
// programs and the builtins library refer to it).
// The mutex is registered with ForkSafety (and never destroyed), so a child
// forked while another thread loads NVRTC does not inherit it held.
inline const NvrtcApi& nvrtc_api(const std::string& path) {
  static std::mutex* mu = [] {
    auto* m = new std::mutex();
    ForkSafety::get().protect(m);
    return m;
  }();
  static std::map<std::string, std::unique_ptr<NvrtcApi>> loaded;
  std::lock_guard<std::mutex> lock(*mu);
  auto it = loaded.find(path);
  if (it != loaded.end()) return *it->second;
  return *loaded.emplace(path, load_nvrtc(path)).first->second;
}

// The path of a libnvrtc already loaded into this process (e.g. by torch).
inline std::string already_loaded_nvrtc() {
  for (const char* soname : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) {
    void* h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
    if (!h) continue;
    Dl_info info{};
    void* sym = dlsym(h, "nvrtcVersion");
    std::string path = (sym && dladdr(sym, &info) && info.dli_fname) ? info.dli_fname : "";
    dlclose(h);  // drops only the reference NOLOAD added
    if (!path.empty()) return path;
  }
  return "";
}

inline std::string nvrtc_in_toolkit(const std::string& root) {
  for (const char* sub : {"lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"}) {
    std::string dir = join_path(root, sub);
    for (const char* name : {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"}) {
      std::string candidate = join_path(dir, name);
      if (is_file(candidate)) return candidate;
    }
  }
  return "";
}

// Where libnvrtc is: DG_JIT_NVRTC_LIBRARY (an Error when wrong), one already
// loaded, a toolkit (CUDA_HOME, CUDA_PATH, /usr/local/cuda), then the dynamic
// loader's own search. Returns "" when none is found.
inline std::string find_nvrtc_library(std::string* origin = nullptr) {
  auto found = [&](std::string path, std::string how) {
    if (origin) *origin = std::move(how);
    return path;
  };
  if (auto explicit_path = env("DG_JIT_NVRTC_LIBRARY")) {
    if (!is_file(*explicit_path))
      fail(cat("DG_JIT_NVRTC_LIBRARY is set to ", *explicit_path, ", which is not a file."));
    return found(*explicit_path, "DG_JIT_NVRTC_LIBRARY");
  }
  if (std::string loaded = already_loaded_nvrtc(); !loaded.empty()) return found(loaded, "already loaded in the process");
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (auto root = env(var))
      if (std::string lib = nvrtc_in_toolkit(*root); !lib.empty()) return found(lib, var);
  }
  if (std::string lib = nvrtc_in_toolkit("/usr/local/cuda"); !lib.empty()) return found(lib, "/usr/local/cuda");
  for (const char* soname : {"libnvrtc.so.13", "libnvrtc.so.12"}) {
    void* h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!h) continue;
    Dl_info info{};
    void* sym = dlsym(h, "nvrtcVersion");
    if (sym && dladdr(sym, &info) && info.dli_fname) return found(info.dli_fname, "the dynamic loader's path");
  }
  return "";
}

// CUDA headers to go with a libnvrtc, from the layouts we know:
//   toolkit:   <root>/lib64/libnvrtc.so        -> <root>/include, <root>/include/cccl
//   cu13 wheel: nvidia/cu13/lib/libnvrtc.so.13 -> nvidia/cu13/include, .../include/cccl
//   cu12 wheels: nvidia/cuda_nvrtc/lib/...      -> nvidia/cuda_runtime/include, nvidia/cuda_cccl/include
inline std::vector<std::string> default_nvrtc_include_dirs(const std::string& library) {
  std::string lib_dir = parent_dir(library);
  std::string root = parent_dir(lib_dir);
  std::string nvidia = parent_dir(root);
  std::vector<std::string> candidates = {
      join_path(root, "include"),
      join_path(root, "include/cccl"),
      join_path(nvidia, "cuda_runtime/include"),
      join_path(nvidia, "cuda_cccl/include"),
  };
  std::vector<std::string> dirs;
  for (const auto& c : candidates)
    if (is_dir(c)) dirs.push_back(absolute_path(c));
  return dirs;
}

inline unsigned long long file_size(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<unsigned long long>(st.st_size) : 0;
}

// What in an NVRTC header directory changes between releases, by content:
// the CUDA runtime's and CCCL's version headers, where present. (NVRTC's own
// patch release is not reported by nvrtcVersion; the library's size stands
// for it in NvrtcCompiler::identity.)
inline std::string header_dir_fingerprint(const std::string& dir) {
  std::string out;
  for (const char* marker : {"cuda_runtime_api.h", "cuda/std/__cccl/version.h"}) {
    std::string path = join_path(dir, marker);
    if (auto content = try_read_file(path)) out += cat(out.empty() ? "" : ", ", marker, " ", sha256_hex(*content).substr(0, 16));
  }
  return out.empty() ? "no version header" : out;
}

// The pip command that provides `header` for an NVRTC of CUDA `major`:
// cuda/... is CCCL (nvidia-cuda-cccl), the rest the CUDA runtime headers.
inline std::string header_wheel_hint(const std::string& header, int major) {
  bool cccl = header.rfind("cuda/", 0) == 0;
  std::string base = cccl ? "nvidia-cuda-cccl" : "nvidia-cuda-runtime";
  if (major >= 13) return cat("pip install \"", base, ">=", major, ",<", major + 1, "\"");
  return cat("pip install ", base, "-cu", major);
}

// Owns one nvrtcProgram.
class NvrtcProgramHandle {
 public:
  explicit NvrtcProgramHandle(const NvrtcApi& api) : api_(api) {}
  ~NvrtcProgramHandle() {
    if (prog_) api_.destroy_program(&prog_);
  }
  NvrtcProgramHandle(const NvrtcProgramHandle&) = delete;
  NvrtcProgramHandle& operator=(const NvrtcProgramHandle&) = delete;
  NvrtcProgram* out() { return &prog_; }
  NvrtcProgram get() const { return prog_; }

 private:
  const NvrtcApi& api_;
  NvrtcProgram prog_ = nullptr;
};

class NvrtcCompiler final : public Compiler {
 public:
  NvrtcCompiler(std::string library, std::vector<std::string> include_dirs)
      : path_(std::move(library)), include_dirs_(std::move(include_dirs)) {
    if (!is_file(path_)) fail(cat("The NVRTC library ", path_, " does not exist."));
    api_ = &nvrtc_api(path_);
    if (include_dirs_.empty()) include_dirs_ = default_nvrtc_include_dirs(path_);
    for (const auto& dir : include_dirs_)
      if (!is_dir(dir)) fail(cat("The NVRTC include directory ", dir, " does not exist."));
    version_ = cat("nvrtc ", api_->major, ".", api_->minor, " (", path_, ")");
    identity_ = cat("nvrtc ", api_->major, ".", api_->minor, ", ", file_size(path_), " bytes");
    for (const auto& dir : include_dirs_) identity_ += cat("; ", header_dir_fingerprint(dir));
  }

  int major() const { return api_->major; }
  int minor() const { return api_->minor; }

  const std::string& backend() const override { return backend_; }
  const std::string& path() const override { return path_; }
  const std::string& version() const override { return version_; }
  const std::vector<std::string>& include_dirs() const { return include_dirs_; }
  std::string identity() const override { return identity_; }
  std::string short_version() const override { return cat("nvrtc ", api_->major, ".", api_->minor); }
  std::vector<std::string> system_include_dirs() const override { return include_dirs_; }

  std::vector<std::string> flags(const CompileOptions& opts, const Diagnostics& diag) const override {
    arch_number(opts.arch);  // validates
    std::vector<std::string> f = {
        "--gpu-architecture=" + opts.arch,
        "-std=" + effective_cpp_std(opts, diag),
        // NVRTC has no --expt-relaxed-constexpr, and in its JIT mode every
        // unannotated function (constexpr ones included) is a host function and
        // an error even when unused. -default-device makes them device functions,
        // which accepts what NVCC accepts with --expt-relaxed-constexpr.
        "-default-device",
    };
    if (opts.opt_level != 3) f.push_back("--ptxas-options=-O" + std::to_string(opts.opt_level));
    for (const auto& dir : opts.include_dirs) f.push_back("--include-path=" + dir);
    for (const auto& dir : include_dirs_) f.push_back("--include-path=" + dir);
    for (const auto& def : opts.defines) f.push_back("--define-macro=" + def);
    if (opts.line_info || diag.line_info) f.push_back("--generate-line-info");
    if (diag.wants_ptxas_report()) f.push_back("--ptxas-options=-v");
    f.insert(f.end(), opts.extra_flags.begin(), opts.extra_flags.end());
    return f;
  }

  CompileResult compile(const CompileRequest& req) const override {
    CompileResult result;
    result.command = "nvrtcCompileProgram(" + req.source_path + ") " + command_line(req.flags);
    if (req.diag.print_command) log_line("deep_jit: " + result.command);
    NvrtcProgramHandle prog(*api_);
    check(api_->create_program(prog.out(), req.source->code.c_str(), req.source_path.c_str(), 0, nullptr, nullptr),
          "nvrtcCreateProgram", req.source->name);
    std::vector<const char*> options;
    for (const auto& f : req.flags) options.push_back(f.c_str());
    NvrtcResult r = api_->compile_program(prog.get(), static_cast<int>(options.size()), options.data());
    result.log = program_log(prog.get());
    if (r != 0) {
      result.status = cat("nvrtcCompileProgram returned ", api_->get_error_string(r));
      return result;
    }
    write_file(req.cubin_path, fetch(prog.get(), api_->get_cubin_size, api_->get_cubin, "CUBIN", req), "cubin");
    if (req.diag.dump_ptx) dump_ptx(prog.get(), req);
    result.ok = true;
    return result;
  }

 private:
  void check(NvrtcResult r, const char* call, const std::string& kernel) const {
    if (r != 0) fail(cat(call, " failed for kernel ", kernel, ": ", api_->get_error_string(r), "."));
  }

  std::string program_log(NvrtcProgram prog) const {
    size_t size = 0;
    if (api_->get_program_log_size(prog, &size) != 0 || size <= 1) return "";
    std::string log(size, '\0');
    if (api_->get_program_log(prog, log.data()) != 0) return "";
    log.resize(size - 1);  // drop the terminating NUL
    return log;
  }

  template <class SizeFn, class DataFn>
  std::string fetch(NvrtcProgram prog, SizeFn size_fn, DataFn data_fn, const char* what,
                    const CompileRequest& req) const {
    size_t size = 0;
    check(size_fn(prog, &size), what, req.source->name);
    std::string data(size, '\0');
    check(data_fn(prog, data.data()), what, req.source->name);
    return data;
  }

  // PTX is available only from some NVRTC versions when compiling for a real
  // architecture; when it is not, say so instead of failing the build.
  void dump_ptx(NvrtcProgram prog, const CompileRequest& req) const {
    size_t size = 0;
    if (api_->get_ptx_size(prog, &size) != 0 || size <= 1) {
      log_line("deep_jit: DG_JIT_DUMP_PTX: NVRTC produced no PTX for kernel " + req.source->name +
               " (it was compiled straight to " + req.source->options.arch + ").");
      return;
    }
    std::string ptx(size, '\0');
    if (api_->get_ptx(prog, ptx.data()) != 0) return;
    ptx.resize(size - 1);
    write_file(join_path(req.work_dir, "kernel.ptx"), ptx, "PTX dump");
  }

  std::string backend_ = "nvrtc";
  std::string path_;
  std::vector<std::string> include_dirs_;
  std::string version_;
  std::string identity_;
  const NvrtcApi* api_ = nullptr;
};

}  // namespace deep_jit::detail
