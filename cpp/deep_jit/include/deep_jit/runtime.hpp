// deep_jit: the process-wide runtime: configuration, compiler selection,
// build (to a cached cubin, no GPU needed) and load (into a device).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cache.hpp"
#include "compiler.hpp"
#include "compiler_nvcc.hpp"
#include "compiler_nvrtc.hpp"
#include "driver.hpp"
#include "record.hpp"
#include "env.hpp"
#include "error.hpp"
#include "fork.hpp"
#include "fs.hpp"
#include "types.hpp"

namespace deep_jit {

namespace detail {

// DG_JIT_CACHE_DIR as roots; empty when unset or empty. A value that names no
// directory (e.g. "::::") is an Error rather than a silent ~/.deep_gemm.
inline std::vector<std::string> cache_roots_from_env() {
  auto dirs = env("DG_JIT_CACHE_DIR");
  if (!dirs) return {};
  std::vector<std::string> roots = split(*dirs, ':');
  if (roots.empty())
    fail(cat("The environment variable DG_JIT_CACHE_DIR is set to '", *dirs,
             "', which names no directory; expected one or more directories separated by ':', "
             "or unset it to use ~/.deep_gemm."));
  return roots;
}

}  // namespace detail

inline RuntimeConfig RuntimeConfig::from_env() {
  RuntimeConfig cfg;
  cfg.cache_roots = detail::cache_roots_from_env();
  if (detail::env_flag("DG_JIT_USE_NVRTC")) cfg.backend = "nvrtc";
  if (auto nvcc = detail::env("DG_JIT_NVCC_COMPILER")) cfg.nvcc_path = *nvcc;
  if (auto lib = detail::env("DG_JIT_NVRTC_LIBRARY")) cfg.nvrtc_library = *lib;
  if (auto inc = detail::env("DG_JIT_NVRTC_INCLUDE_DIRS")) cfg.nvrtc_include_dirs = detail::split(*inc, ':');
  cfg.quiet = detail::env_flag("DG_JIT_QUIET");
  if (auto rec = detail::env("DG_JIT_RECORD")) cfg.record_path = detail::absolute_path(*rec);
  return cfg;
}

namespace detail {

// Fills what the caller left empty: cache roots from the environment or the
// default ~/.deep_gemm, made absolute so later chdir() calls cannot move them.
inline RuntimeConfig complete_config(RuntimeConfig cfg) {
  if (cfg.cache_roots.empty()) {
    cfg.cache_roots = cache_roots_from_env();
    if (cfg.cache_roots.empty()) cfg.cache_roots = {join_path(home_dir(), ".deep_gemm")};
  }
  for (auto& root : cfg.cache_roots) root = absolute_path(root);
  if (!cfg.backend.empty() && cfg.backend != "nvcc" && cfg.backend != "nvrtc")
    fail(cat("The JIT backend '", cfg.backend, "' is unknown; use \"nvcc\", \"nvrtc\" or \"\" (automatic)."));
  return cfg;
}

// Before any compile: every header in cfg.required_headers must be in one of
// NVRTC's include directories, else an Error naming the wheel that has it
// (NVRTC would fail later with "cannot open source file").
inline void check_nvrtc_headers(const NvrtcCompiler& c, const RuntimeConfig& cfg) {
  for (const auto& header : cfg.required_headers) {
    bool found = false;
    for (const auto& dir : c.include_dirs()) found = found || is_file(join_path(dir, header));
    if (found) continue;
    std::string dirs;
    for (const auto& dir : c.include_dirs()) dirs += (dirs.empty() ? "" : ", ") + dir;
    bool cccl = header.rfind("cuda/", 0) == 0;
    fail(cat("NVRTC (", c.path(), ", CUDA ", c.major(), ".", c.minor(), ") is the JIT compiler here, but the ",
             cccl ? "CCCL headers" : "CUDA runtime headers", " it needs (", header, ") are in none of its include "
             "directories (", dirs.empty() ? "none" : dirs, "). Fix: ", header_wheel_hint(header, c.major()),
             ", or set DG_JIT_NVRTC_INCLUDE_DIRS to folders holding them (':'-separated), or install a CUDA "
             "toolkit (its nvcc is then used)."));
  }
}

inline std::shared_ptr<const Compiler> make_nvrtc(const RuntimeConfig& cfg, const std::string& why) {
  std::string how = "configured by the caller";
  std::string lib = cfg.nvrtc_library.empty() ? find_nvrtc_library(&how) : cfg.nvrtc_library;
  if (lib.empty())
    fail("No CUDA compiler was found: no nvcc, and libnvrtc is not loaded, not in CUDA_HOME, CUDA_PATH or "
         "/usr/local/cuda, and not on the loader path. Install the nvidia-cuda-nvrtc wheel (with nvidia-cuda-runtime "
         "and nvidia-cuda-cccl), or a CUDA toolkit, or set DG_JIT_NVRTC_LIBRARY.");
  if (!cfg.nvrtc_library.empty() && env("DG_JIT_NVRTC_LIBRARY") == lib) how = "DG_JIT_NVRTC_LIBRARY";
  auto c = std::make_shared<NvrtcCompiler>(lib, cfg.nvrtc_include_dirs);
  check_nvrtc_headers(*c, cfg);
  c->set_origin(cat(why, "; libnvrtc (", how, "): ", lib));
  return c;
}

// Backend choice: explicit backend; else DG_JIT_USE_NVRTC=1 -> NVRTC; else
// NVCC when one is found; else NVRTC.
inline std::shared_ptr<const Compiler> make_compiler(const RuntimeConfig& cfg) {
  std::string backend = cfg.backend;
  if ((backend.empty() || backend == "nvrtc") && env_flag("DG_JIT_USE_NVRTC"))
    return make_nvrtc(cfg, "NVRTC because DG_JIT_USE_NVRTC=1");
  if (backend == "nvrtc") return make_nvrtc(cfg, "NVRTC requested by the caller");
  FoundNvcc nvcc = cfg.nvcc_path.empty() ? locate_nvcc() : FoundNvcc{cfg.nvcc_path, "configured by the caller"};
  if (!cfg.nvcc_path.empty() && env("DG_JIT_NVCC_COMPILER") == cfg.nvcc_path) nvcc.origin = "DG_JIT_NVCC_COMPILER";
  if (!nvcc.path.empty() && nvcc_host_compiler().empty()) {
    // An nvcc merely found (PATH, CUDA_PATH, /usr/local/cuda) that cannot run
    // gives way to NVRTC, which needs no host compiler; one asked for is an Error.
    std::string why = cat("nvcc (", nvcc.path, ", from ", nvcc.origin, ") needs a host compiler to preprocess "
                          "kernels and there is none (no gcc on PATH, no NVCC_CCBIN)");
    bool asked = backend == "nvcc" || nvcc.origin == "DG_JIT_NVCC_COMPILER" || nvcc.origin == "CUDA_HOME" ||
                 nvcc.origin == "configured by the caller";
    if (asked)
      fail(cat("The JIT compiler ", why, ". Fix: install gcc and g++, or set NVCC_CCBIN to a host compiler, or set "
               "DG_JIT_USE_NVRTC=1 (NVRTC needs no host compiler)."));
    return make_nvrtc(cfg, "NVRTC because " + why);
  }
  if (!nvcc.path.empty()) {
    auto c = std::make_shared<NvccCompiler>(nvcc.path);
    std::string real = c->path() == nvcc.path ? "" : cat(" -> ", c->path());
    c->set_origin(cat(backend == "nvcc" ? "nvcc requested by the caller" : "nvcc found", " (", nvcc.origin, "): ",
                      nvcc.path, real));
    return c;
  }
  if (backend == "nvcc")
    fail("The JIT backend is nvcc but no nvcc was found (looked in DG_JIT_NVCC_COMPILER, CUDA_HOME, CUDA_PATH, "
         "PATH and /usr/local/cuda/bin).");
  return make_nvrtc(cfg, "NVRTC because no nvcc was found (DG_JIT_NVCC_COMPILER, CUDA_HOME, CUDA_PATH, PATH, "
                         "/usr/local/cuda/bin)");
}

inline std::string display_version(const Compiler& c) { return c.short_version(); }

}  // namespace detail

class Runtime {
 public:
  // The process-wide runtime. Never destroyed: loaded modules must stay valid
  // until exit, and CUDA must not be called from static destructors.
  static Runtime& get() {
    static Runtime* instance = new Runtime();
    return *instance;
  }

  // Replaces the configuration (empty fields are filled from the environment)
  // and forgets the detected compiler; loaded kernels stay loaded.
  void configure(RuntimeConfig cfg) {
    RuntimeConfig complete = detail::complete_config(std::move(cfg));
    std::lock_guard<std::mutex> lock(mu_);
    cfg_ = std::move(complete);
    configured_ = true;
    compiler_.reset();
    ++generation_;
  }

  RuntimeConfig config() const {
    std::lock_guard<std::mutex> lock(mu_);
    ensure_configured_locked();
    return cfg_;
  }

  // Compiles `src` (or finds it in the disk cache) and returns the cubin's
  // path. Thread-safe; needs no GPU and no driver.
  std::string build(const KernelSource& src) { return build_outcome(src).cubin_path; }

  // build(), and what the cache key is made of (for warmup tools).
  struct BuildReport {
    std::string cubin_path;
    bool compiled = false;
    detail::CacheKey key;
    std::string backend, compiler_version;
  };
  BuildReport build_report(const KernelSource& src) {
    auto [cfg, compiler] = snapshot();
    detail::Diagnostics diag = detail::Diagnostics::from_env();
    detail::DiskCache cache(src, *compiler, cfg.cache_roots, diag, cfg.quiet, stats_);
    record(cfg, src, *compiler, cache);
    detail::BuildOutcome out = cache.build();
    return {out.cubin_path, out.compiled, cache.key_parts(), compiler->backend(),
            detail::one_line(compiler->short_version())};
  }

  // Builds `src` and loads it into `device`'s primary context. Memoised per
  // (cache key, device); the reference stays valid for the process.
  const Kernel& load(const KernelSource& src, int device) {
    auto [cfg, compiler] = snapshot();
    detail::Diagnostics diag = detail::Diagnostics::from_env();
    detail::DiskCache cache(src, *compiler, cfg.cache_roots, diag, cfg.quiet, stats_);
    record(cfg, src, *compiler, cache);
    std::string memo_key = cache.key() + "@" + std::to_string(device);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = kernels_.find(memo_key);
      if (it != kernels_.end()) return *it->second;
    }
    detail::BuildOutcome built = cache.build();
    std::lock_guard<std::mutex> lock(mu_);
    auto it = kernels_.find(memo_key);  // another thread may have loaded it meanwhile
    if (it != kernels_.end()) return *it->second;
    auto kernel = load_module(src, built, device);
    return *kernels_.emplace(memo_key, std::move(kernel)).first->second;
  }

  JitInfo info() const {
    JitInfo out;
    std::shared_ptr<const detail::Compiler> compiler;
    RuntimeConfig cfg;
    uint64_t generation = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ensure_configured_locked();
      out.cache_roots = cfg_.cache_roots;
      compiler = compiler_;
      cfg = cfg_;
      generation = generation_;
      out.kernels_loaded = kernels_.size();
      for (const auto& [key, k] : kernels_) out.loaded_names.push_back(k->name);
    }
    if (!compiler) {
      try {
        compiler = detect_compiler(cfg, generation);
      } catch (const Error& e) {
        out.compiler_version = std::string("unavailable: ") + e.what();
      }
    }
    if (compiler) {
      out.backend = compiler->backend();
      out.compiler_path = compiler->path();
      out.compiler_version = detail::display_version(*compiler);
      out.selection = compiler->origin();
      out.system_include_dirs = compiler->system_include_dirs();
    }
    out.compiles = stats_.compiles.load();
    out.compile_failures = stats_.compile_failures.load();
    out.disk_hits = stats_.disk_hits.load();
    out.repaired = stats_.repaired.load();
    return out;
  }

 private:
  // mu_ is held only briefly (never across a compile or compiler detection)
  // and is registered with ForkSafety, so a forked child finds it free.
  Runtime() { detail::ForkSafety::get().protect(&mu_); }

  void ensure_configured_locked() const {
    if (configured_) return;
    cfg_ = detail::complete_config(RuntimeConfig::from_env());
    configured_ = true;
    ++generation_;
  }

  // The configuration and compiler to use for one call; detection runs once
  // per configure() and is retried after a failure. It runs `nvcc --version`
  // or loads NVRTC, so it happens outside mu_: a child forked meanwhile must
  // not inherit mu_ held (two threads may detect at once; one result is kept).
  std::pair<RuntimeConfig, std::shared_ptr<const detail::Compiler>> snapshot() {
    RuntimeConfig cfg;
    uint64_t generation = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ensure_configured_locked();
      if (compiler_) return {cfg_, compiler_};
      cfg = cfg_;
      generation = generation_;
    }
    return {cfg, detect_compiler(cfg, generation)};
  }

  // Makes the compiler for `cfg` and keeps it unless configure() ran since
  // `generation` was read (the caller still uses it for its own call).
  std::shared_ptr<const detail::Compiler> detect_compiler(const RuntimeConfig& cfg, uint64_t generation) const {
    std::shared_ptr<const detail::Compiler> made = detail::make_compiler(cfg);
    std::lock_guard<std::mutex> lock(mu_);
    if (generation_ != generation) return made;
    if (!compiler_) compiler_ = made;
    return compiler_;
  }

  detail::BuildOutcome build_outcome(const KernelSource& src) {
    auto [cfg, compiler] = snapshot();
    detail::Diagnostics diag = detail::Diagnostics::from_env();
    detail::DiskCache cache(src, *compiler, cfg.cache_roots, diag, cfg.quiet, stats_);
    record(cfg, src, *compiler, cache);
    return cache.build();
  }

  static void record(const RuntimeConfig& cfg, const KernelSource& src, const detail::Compiler& compiler,
                     const detail::DiskCache& cache) {
    if (!cfg.record_path.empty())
      detail::KernelRecorder::get().record(cfg.record_path, src, compiler, cache.key_parts());
  }

  static std::unique_ptr<Kernel> load_module(const KernelSource& src, const detail::BuildOutcome& built, int device) {
    const detail::DriverApi& api = detail::driver();
    detail::ScopedDeviceContext scope(device);
    auto k = std::make_unique<Kernel>();
    k->device = device;
    k->name = src.name;
    k->cubin_path = built.cubin_path;
    k->context = detail::primary_context(device);
    CUresult r = api.module_load_data(&k->module, built.cubin.data());
    if (r != CUDA_SUCCESS) {
      const DeviceInfo& dev = device_info(device);
      detail::fail(detail::cat("Loading kernel ", src.name, " (built for ", src.options.arch, ") on device ", device,
                               " (", dev.name, ", sm_", dev.cc_major, dev.cc_minor, ") failed: ", detail::describe(r),
                               ". Cubin: ", built.cubin_path, "."));
    }
    r = api.module_get_function(&k->function, k->module, src.entry.c_str());
    if (r != CUDA_SUCCESS) {
      api.module_unload(k->module);
      detail::fail(detail::cat("Kernel ", src.name, " has no entry point '", src.entry, "' in ", built.cubin_path,
                               " (", detail::describe(r), "); is it declared extern \"C\" __global__?"));
    }
    return k;
  }

  mutable std::mutex mu_;
  mutable RuntimeConfig cfg_;
  mutable bool configured_ = false;
  mutable std::shared_ptr<const detail::Compiler> compiler_;
  mutable uint64_t generation_ = 0;  // bumped by each (re)configuration
  std::map<std::string, std::unique_ptr<Kernel>> kernels_;
  detail::CacheStats stats_;
};

}  // namespace deep_jit
