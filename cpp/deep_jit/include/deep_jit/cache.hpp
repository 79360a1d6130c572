// deep_jit: the disk cache of compiled kernels.
//
// Layout under each cache root:
//   cache/<name>-<key32>/   a published entry: kernel.cubin, manifest, kernel.cu
//                           (+ compile.log, kernel.ptx, kernel.sass when asked)
//   tmp/                    private build directories, and entries moved aside
//   locks/<name>-<key32>.lock   flock(2) files: one compile per key at a time
//   failed/<name>-<key32>/  source, log and command of the last failed compile
//
// Guarantees:
// - An entry appears only by rename(2) of a complete build directory, so a
//   reader never sees a half-written entry, and a compiler killed midway
//   leaves only a stale tmp/ directory (removed by the next miss once its
//   owner is dead, with the compiler it left running; else a day later).
// - Each entry is validated before use (manifest, size, SHA-256, ELF magic),
//   read without following links or blocking, and bounded by its recorded
//   size. A corrupt one, or anything else in its place, is moved aside and
//   rebuilt.
// - Concurrent processes serialise on the key's lock file, and even without it
//   (e.g. a file system without flock) the rename protocol keeps exactly one
//   valid entry: a loser of the rename uses the winner's entry.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "compiler.hpp"
#include "env.hpp"
#include "error.hpp"
#include "fork.hpp"
#include "fs.hpp"
#include "hash.hpp"
#include "process.hpp"
#include "types.hpp"

namespace deep_jit::detail {

inline constexpr std::string_view kManifestMagic = "deep_jit-cache-entry 1";
// Version of the key's recipe: bumping it retires every entry made by the old one.
inline constexpr std::string_view kKeyMagic = "deep_jit-cache-key 2";
inline constexpr double kStaleTempSeconds = 24 * 3600.0;

// ---------------------------------------------------------------- includes

struct IncludeDirective {
  std::string target;
  bool angled = false;
};

// The #include lines of a source. A plain line scanner: it also sees includes
// inside #if blocks, which only makes the key more conservative.
inline std::vector<IncludeDirective> scan_includes(std::string_view code) {
  std::vector<IncludeDirective> found;
  size_t pos = 0;
  while (pos < code.size()) {
    size_t eol = code.find('\n', pos);
    if (eol == std::string_view::npos) eol = code.size();
    std::string_view line = code.substr(pos, eol - pos);
    pos = eol + 1;
    size_t i = line.find_first_not_of(" \t");
    if (i == std::string_view::npos || line[i] != '#') continue;
    i = line.find_first_not_of(" \t", i + 1);
    if (i == std::string_view::npos || line.compare(i, 7, "include") != 0) continue;
    i = line.find_first_not_of(" \t", i + 7);
    if (i == std::string_view::npos || (line[i] != '"' && line[i] != '<')) continue;
    char close = line[i] == '"' ? '"' : '>';
    size_t end = line.find(close, i + 1);
    if (end == std::string_view::npos) continue;
    found.push_back({std::string(line.substr(i + 1, end - i - 1)), close == '>'});
  }
  return found;
}

// Hashes of include files, memoised by their stat identity so that repeated
// key computations (load() on every call) do not re-read unchanged files.
class FileHashMemo {
 public:
  FileHashMemo() { ForkSafety::get().protect(&mu_); }

  // Content and hash of `path`; nothing when it cannot be read.
  std::optional<std::pair<std::string, std::string>> read(const std::string& path) {
    auto stamp = file_stamp(path);
    if (!stamp) return std::nullopt;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = memo_.find(path);
      if (it != memo_.end() && it->second.stamp == *stamp) return std::make_pair(it->second.text, it->second.sha);
    }
    auto text = try_read_file(path);
    if (!text) return std::nullopt;
    std::string sha = sha256_hex(*text);
    std::lock_guard<std::mutex> lock(mu_);
    memo_[path] = {*stamp, *text, sha};
    return std::make_pair(*text, sha);
  }

 private:
  struct Item {
    FileStamp stamp;
    std::string text;
    std::string sha;
  };
  std::mutex mu_;
  std::map<std::string, Item> memo_;
};

inline FileHashMemo& file_hash_memo() {
  static FileHashMemo* memo = new FileHashMemo();  // never destroyed: registered with ForkSafety
  return *memo;
}

// `path` as "<I{i}>/<rest>" when it lies under include_dirs[i] (absolute,
// normalised), else `path` itself: the cache key names headers by their place
// in an include root, not by where that root is installed.
inline std::string include_relative_name(const std::string& path, const std::vector<std::string>& abs_dirs) {
  for (size_t i = 0; i < abs_dirs.size(); ++i) {
    const std::string& d = abs_dirs[i];
    if (path.size() > d.size() + 1 && path.compare(0, d.size(), d) == 0 && path[d.size()] == '/')
      return cat("<I", i, ">/", path.substr(d.size() + 1));
  }
  return path;
}

// Every file under `include_dirs` that `code` reaches through #include, as
// (name relative to its include root, content hash), sorted by name.
inline std::vector<std::pair<std::string, std::string>> tracked_includes(std::string_view code,
                                                                         const std::vector<std::string>& include_dirs) {
  std::vector<std::string> abs_dirs;
  for (const auto& d : include_dirs) abs_dirs.push_back(absolute_path(d));
  std::map<std::string, std::string> seen;  // absolute path -> sha
  std::map<std::string, std::string> named;  // relative name -> sha
  auto visit = [&](std::string_view text, const std::string& own_dir, auto& self) -> void {
    for (const auto& inc : scan_includes(text)) {
      std::vector<std::string> search;
      if (!inc.angled && !own_dir.empty()) search.push_back(own_dir);
      search.insert(search.end(), abs_dirs.begin(), abs_dirs.end());
      for (const auto& dir : search) {
        std::string path = absolute_path(join_path(dir, inc.target));
        if (seen.count(path)) break;
        auto content = file_hash_memo().read(path);
        if (!content) continue;
        seen[path] = content->second;
        named[include_relative_name(path, abs_dirs)] = content->second;
        self(content->first, parent_dir(path), self);
        break;
      }
    }
  };
  visit(code, "", visit);
  return {named.begin(), named.end()};
}

// ---------------------------------------------------------------- keys

inline std::string sanitize_name(std::string_view name) {
  std::string out;
  for (char c : name.substr(0, 80)) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.';
    out.push_back(ok ? c : '_');
  }
  if (out.empty() || out[0] == '.') out.insert(out.begin(), 'k');
  return out;
}

inline void check_kernel_source(const KernelSource& src) {
  if (src.name.empty()) fail("A kernel source has no name; KernelSource::name is used in logs, errors and the cache.");
  if (src.entry.empty()) fail(cat("Kernel ", src.name, " has no entry point; set KernelSource::entry."));
  if (src.code.empty()) fail(cat("Kernel ", src.name, " has no source code."));
}

inline void check_include_dirs(const KernelSource& src) {
  for (const auto& dir : src.options.include_dirs)
    if (!is_dir(dir))
      fail(cat("The include directory ", dir, " of kernel ", src.name, " does not exist or is not a directory."));
}

// `flag` with a trailing directory from `dirs` replaced by its placeholder
// ("-I/site-packages/deep_gemm/include" -> "-I<I0>"): the key hashes what is in
// those directories, not where they are installed.
inline std::string key_flag(const std::string& flag, const std::vector<std::pair<std::string, std::string>>& dirs) {
  for (const auto& [dir, placeholder] : dirs)
    if (!dir.empty() && flag.size() >= dir.size() && flag.compare(flag.size() - dir.size(), dir.size(), dir) == 0)
      return flag.substr(0, flag.size() - dir.size()) + placeholder;
  return flag;
}

// The cache key and the digests it is made of (warmup compares them with a
// recording's to say why a key differs).
struct CacheKey {
  std::string key;       // SHA-256 of everything below, with the kernel's name, entry and source
  std::string compiler;  // backend and Compiler::identity() (no install path)
  std::string flags;     // architecture and flags, include directories as placeholders
  std::string includes;  // the headers reached, by relative name and content
};

// The cache key: everything that can change the cubin, and nothing that only
// says where things are installed (include roots, the compiler's path), so
// two installs with identical headers and one compiler build share entries.
inline CacheKey cache_key(const KernelSource& src, const Compiler& compiler, const std::vector<std::string>& flags) {
  CacheKey k;
  k.compiler = Sha256().field(compiler.backend()).field(compiler.identity()).hex_digest();
  std::vector<std::pair<std::string, std::string>> dirs;
  for (size_t i = 0; i < src.options.include_dirs.size(); ++i) {
    dirs.emplace_back(src.options.include_dirs[i], cat("<I", i, ">"));
    dirs.emplace_back(absolute_path(src.options.include_dirs[i]), cat("<I", i, ">"));
  }
  const auto system_dirs = compiler.system_include_dirs();
  for (size_t i = 0; i < system_dirs.size(); ++i) dirs.emplace_back(system_dirs[i], cat("<S", i, ">"));
  Sha256 f;
  f.field(src.options.arch).field(cat("flags:", flags.size()));
  for (const auto& flag : flags) f.field(key_flag(flag, dirs));
  k.flags = f.hex_digest();
  auto includes = tracked_includes(src.code, src.options.include_dirs);
  Sha256 inc;
  inc.field(cat("includes:", includes.size()));
  for (const auto& [name, sha] : includes) inc.field(name).field(sha);
  k.includes = inc.hex_digest();
  k.key = Sha256()
              .field(kKeyMagic)
              .field(src.name)
              .field(src.entry)
              .field(src.code)
              .field(k.compiler)
              .field(k.flags)
              .field(k.includes)
              .hex_digest();
  return k;
}

inline std::string entry_dir_name(const KernelSource& src, const std::string& key) {
  return sanitize_name(src.name) + "-" + key.substr(0, 32);
}

// ---------------------------------------------------------------- entries

inline std::string one_line(std::string text) {
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return text;
}

inline bool has_elf_magic(std::string_view data) { return data.size() >= 4 && data.substr(0, 4) == "\x7f" "ELF"; }

inline std::string manifest_text(const KernelSource& src, const std::string& key, const Compiler& compiler,
                                 std::string_view cubin) {
  return cat(kManifestMagic, "\nname ", src.name, "\nentry ", src.entry, "\nkey ", key, "\nbackend ",
             compiler.backend(), "\ncompiler ", compiler.path(), "\ncompiler_version ", one_line(compiler.short_version()),
             "\ncubin_bytes ", cubin.size(), "\ncubin_sha256 ", sha256_hex(cubin), "\n");
}

// The value of "<field> <value>" in a manifest, or "".
inline std::string manifest_field(std::string_view manifest, std::string_view field) {
  std::string needle = cat("\n", field, " ");
  size_t at = manifest.find(needle);
  if (at == std::string_view::npos) return "";
  size_t begin = at + needle.size();
  size_t end = manifest.find('\n', begin);
  return std::string(manifest.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin));
}

// Bounds on what is read from an entry, whatever its files claim.
inline constexpr size_t kMaxManifestBytes = 64 * 1024;
inline constexpr unsigned long long kMaxCubinBytes = 1ULL << 30;

// Opens `name` inside the entry directory `dirfd` without following a link
// and without blocking (a FIFO, a device), and reads it if it is a regular
// file of at most `max_bytes`; otherwise nothing, with the reason in `why`.
inline std::optional<std::string> read_entry_file(int dirfd, const char* name, size_t max_bytes, std::string* why) {
  int fd = ::openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) *why = "is missing";
    else if (err == ELOOP) *why = "is a symbolic link";
    else *why = cat("cannot be opened (", errno_text(err), ")");
    return std::nullopt;
  }
  std::string reason;
  auto data = read_open_regular(fd, max_bytes, &reason);
  if (!data) *why = reason == "not a regular file" ? "is not a regular file (a FIFO or device?)" : "cannot be read: " + reason;
  return data;
}

// Keeps the directory descriptor of an entry open for the openat() calls.
class DirFd {
 public:
  explicit DirFd(int fd) : fd_(fd) {}
  ~DirFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  DirFd(const DirFd&) = delete;
  DirFd& operator=(const DirFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// The cubin of a valid entry; otherwise nothing, with the reason in `why`
// ("" when there is simply no entry). The caller uses the returned bytes, not
// the file, so a concurrent change to the file after validation cannot reach
// the driver. Nothing is followed through a link or read from a FIFO or
// device, and no more than the manifest's recorded size is read, so a hostile
// or damaged entry can neither hang the caller nor exhaust its memory.
inline std::optional<std::string> read_valid_entry(const std::string& dir, const std::string& key, std::string* why) {
  DirFd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (d.get() < 0) {
    int err = errno;
    std::string kind = file_kind_text(dir);
    if (kind == "missing") *why = "";
    else if (kind == "a directory") *why = cat("its directory cannot be opened (", errno_text(err), ")");
    else *why = cat(kind, " is where its directory belongs");
    return std::nullopt;
  }
  std::string reason;
  auto manifest = read_entry_file(d.get(), "manifest", kMaxManifestBytes, &reason);
  if (!manifest) {
    *why = cat("its manifest ", reason);
    return std::nullopt;
  }
  if (manifest->rfind(kManifestMagic, 0) != 0 || manifest_field(*manifest, "key") != key) {
    *why = "its manifest is malformed or belongs to another key";
    return std::nullopt;
  }
  std::string recorded = manifest_field(*manifest, "cubin_bytes");
  unsigned long long bytes = 0;
  if (recorded.empty() || recorded.size() > 12 || recorded.find_first_not_of("0123456789") != std::string::npos ||
      (bytes = std::stoull(recorded)) == 0 || bytes > kMaxCubinBytes) {
    *why = cat("its manifest records a cubin size of '", recorded, "', not a number of bytes up to ", kMaxCubinBytes);
    return std::nullopt;
  }
  auto cubin = read_entry_file(d.get(), "kernel.cubin", static_cast<size_t>(bytes), &reason);
  if (!cubin) {
    *why = cat("its cubin ", reason, " (the manifest records ", bytes, " bytes)");
    return std::nullopt;
  }
  if (cubin->size() != bytes) {
    *why = cat("its cubin has ", cubin->size(), " bytes, not the ", bytes, " bytes the manifest records (truncated?)");
    return std::nullopt;
  }
  if (!has_elf_magic(*cubin) || sha256_hex(*cubin) != manifest_field(*manifest, "cubin_sha256")) {
    *why = "its cubin's SHA-256 does not match the manifest (corrupted)";
    return std::nullopt;
  }
  return cubin;
}

// Moves whatever is at `dir` (a bad entry, a file, a link, a FIFO) out of
// cache/ (one rename, atomic for readers), then deletes it. Links are removed,
// never followed. Losing a race to another process doing the same is fine.
inline void quarantine(const std::string& root, const std::string& dir) {
  std::string holder;
  try {
    holder = make_temp_dir(join_path(root, "tmp"), owned_temp_prefix("corrupt"));
  } catch (const Error&) {
    remove_tree(dir);  // no room to move it aside: delete in place
    return;
  }
  ::rename(dir.c_str(), join_path(holder, "entry").c_str());
  remove_tree(holder);
}

// ---------------------------------------------------------------- locking

// An exclusive flock(2) on a per-key file. The kernel drops it when the holder
// dies, so a killed process never leaves the key locked.
//
// DG_JIT_DISABLE_LOCKS=1 skips it (for file systems where flock blocks or
// fails); correctness then rests on the rename protocol alone, which the
// self-test checks this way.
class FileLock {
 public:
  explicit FileLock(const std::string& path) {
    if (env_flag("DG_JIT_DISABLE_LOCKS")) return;
    fd_ = open_lock_file(path);
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      // Some network file systems refuse flock; the rename protocol is still safe.
      break;
    }
  }
  ~FileLock() {
    if (fd_ >= 0) ForkSafety::get().close_tracked(fd_);  // closing releases the lock
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  // The descriptor is recorded with ForkSafety, so a child forked while we
  // hold the lock closes its copy instead of keeping the key locked forever.
  // Anything other than a regular file at `path` (a directory, a link, a
  // FIFO) is in the way: it is removed and the file created afresh.
  static int open_lock_file(const std::string& path) {
    auto open_once = [&] {
      return ForkSafety::get().open_tracked([&] {
        int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, kPublicFileMode);
        // Another user's lock file: flock(2) works on a read-only descriptor too.
        if (fd < 0 && errno == EACCES) fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        else if (fd >= 0) ::fchmod(fd, kPublicFileMode);  // fails harmlessly on another user's file
        return fd;
      });
    };
    std::string found;
    for (int attempt = 0; attempt < 2; ++attempt) {
      int fd = open_once();
      int err = errno;
      if (fd >= 0) {
        struct stat st{};
        if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) return fd;
        ForkSafety::get().close_tracked(fd);
        found = file_kind_text(path);
      } else if (err == ELOOP || err == EISDIR || err == ENXIO || err == ENOTDIR || err == EWOULDBLOCK) {
        found = file_kind_text(path);
      } else {
        fail(cat("Cannot create the JIT cache lock file ", path, ": ", errno_text(err), "."));
      }
      if (attempt == 0) {
        log_line(cat("deep_jit: the JIT cache lock file ", path, " is ", found,
                     ", not a regular file; replacing it."));
        remove_tree(path);
      }
    }
    fail(cat("Cannot create the JIT cache lock file ", path, ": expected a regular file, found ", found,
             " even after removing it."));
  }

  int fd_ = -1;
};

// Modes 0755 / 0644 for everything under `dir` (not following links), so an
// entry is readable by everyone who can read the cache root whatever the
// umask of the process that compiled it.
inline void make_tree_public(const std::string& dir) {
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    auto kind = it->symlink_status(ec).type();
    if (kind == std::filesystem::file_type::directory) ::chmod(it->path().c_str(), kPublicDirMode);
    else if (kind == std::filesystem::file_type::regular) ::chmod(it->path().c_str(), kPublicFileMode);
  }
}

// ---------------------------------------------------------------- roots

// Creates the writable root's sub-directories, turning any failure (read-only
// file system, permissions) into one clear message naming the root. Something
// other than a directory (or a link to one) where a sub-directory belongs is
// in the cache's own namespace and in the way: it is removed, loudly.
inline void prepare_writable_root(const std::string& root) {
  for (const char* sub : {"cache", "tmp", "locks", "failed"}) {
    std::string dir = join_path(root, sub);
    if (std::string kind = file_kind_text(dir); kind != "missing" && !is_dir(dir)) {
      log_line(cat("deep_jit: the JIT cache directory ", dir, " is ", kind, ", not a directory; replacing it."));
      ::unlink(dir.c_str());
    }
    std::error_code ec;
    make_public_dirs(dir, ec);
    if (ec || !is_dir(dir))
      fail(cat("The JIT cache directory ", root, " is not writable (creating ", dir, " failed: ",
               ec ? ec.message() : std::string("not a directory"),
               "). Set DG_JIT_CACHE_DIR to a writable directory."));
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
      fail(cat("The JIT cache directory ", root, " is not writable (", dir, ": ", errno_text(errno),
               "). Set DG_JIT_CACHE_DIR to a writable directory."));
  }
}

// Stops the compiler an abandoned build directory records (compiler.pid,
// written by run_process), with everything it started.
inline void kill_recorded_compiler(const std::string& work, const Diagnostics& diag) {
  std::string why;
  DirFd d(::open(work.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (d.get() < 0) return;
  auto text = read_entry_file(d.get(), "compiler.pid", 64, &why);
  if (!text) return;
  std::vector<std::string> parts = split(*text, ' ');
  if (parts.size() < 2) return;
  pid_t pid = static_cast<pid_t>(std::strtol(parts[0].c_str(), nullptr, 10));
  unsigned long long start = std::strtoull(parts[1].c_str(), nullptr, 10);
  if (kill_process_tree(pid, start))
    debug_log(diag, cat("killed compiler process ", static_cast<long>(pid), " left running by the dead owner of ", work));
}

// Removes build directories left behind by processes killed mid-compile:
// at once when the name records an owner in our PID space that is dead
// (first stopping the compiler it left running), else after a day (owners on
// other hosts or in other PID namespaces, names without an owner).
inline void remove_stale_temps(const std::string& root, const Diagnostics& diag) {
  std::string tmp = join_path(root, "tmp");
  std::string here;
  bool here_known = false;
  for (const auto& name : list_dir(tmp)) {
    std::string path = join_path(tmp, name);
    auto owner = temp_owner(name);
    if (owner && !here_known) {
      here = pid_space_tag();
      here_known = true;
    }
    if (owner && !here.empty() && owner->tag == here && owner->pid != ::getpid() && !process_alive(owner->pid)) {
      kill_recorded_compiler(path, diag);
      debug_log(diag, cat("removing ", path, ": its owner, process ", static_cast<long>(owner->pid), ", is dead"));
      remove_tree(path);
      continue;
    }
    if (age_seconds(path) > kStaleTempSeconds) remove_tree(path);
  }
}

// ---------------------------------------------------------------- sass

inline std::string find_cuobjdump(const Compiler& compiler) {
  std::vector<std::string> candidates;
  if (compiler.backend() == "nvcc") candidates.push_back(join_path(parent_dir(compiler.path()), "cuobjdump"));
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (auto root = env(var)) candidates.push_back(join_path(*root, "bin/cuobjdump"));
  candidates.push_back(find_in_path("cuobjdump"));
  candidates.push_back("/usr/local/cuda/bin/cuobjdump");
  for (const auto& c : candidates)
    if (!c.empty() && is_executable_file(c)) return c;
  return "";
}

// DG_JIT_DUMP_SASS: writes kernel.sass next to the cubin (best effort).
inline void dump_sass(const std::string& entry_dir, const Compiler& compiler) {
  std::string target = join_path(entry_dir, "kernel.sass");
  if (is_file(target)) return;
  std::string tool = find_cuobjdump(compiler);
  if (tool.empty()) {
    log_line("deep_jit: DG_JIT_DUMP_SASS is set but cuobjdump was not found (looked next to nvcc, in CUDA_HOME, "
             "CUDA_PATH, PATH and /usr/local/cuda/bin).");
    return;
  }
  ProcessResult r = run_process({tool, "--dump-sass", join_path(entry_dir, "kernel.cubin")});
  std::string tmp = target + ".tmp." + std::to_string(::getpid());
  try {
    write_file(tmp, r.output, "SASS dump");
    ::rename(tmp.c_str(), target.c_str());
  } catch (const Error& e) {
    log_line(std::string("deep_jit: DG_JIT_DUMP_SASS: ") + e.what());
  }
}

// ---------------------------------------------------------------- build

struct BuildOutcome {
  std::string cubin_path;
  std::string cubin;  // validated bytes
  bool compiled = false;
  bool repaired = false;
};

struct CacheStats {
  std::atomic<size_t> compiles{0};
  std::atomic<size_t> compile_failures{0};
  std::atomic<size_t> disk_hits{0};
  std::atomic<size_t> repaired{0};
};

class DiskCache {
 public:
  DiskCache(const KernelSource& src, const Compiler& compiler, const std::vector<std::string>& roots,
            const Diagnostics& diag, bool quiet, CacheStats& stats)
      : src_(src), compiler_(compiler), roots_(roots), diag_(diag), quiet_(quiet), stats_(stats) {
    if (roots_.empty()) fail("No JIT cache directory is configured.");
    check_kernel_source(src_);
    check_include_dirs(src_);
    flags_ = compiler_.flags(src_.options, diag_);
    key_ = cache_key(src_, compiler_, flags_);
    dir_name_ = entry_dir_name(src_, key_.key);
  }

  // The full SHA-256 cache key (computing it needs no compile and no GPU).
  const std::string& key() const { return key_.key; }
  const CacheKey& key_parts() const { return key_; }

  BuildOutcome build() {
    for (const auto& root : roots_)
      if (auto hit = lookup(root)) return finish_hit(std::move(*hit));
    return build_in(roots_.front());
  }

 private:
  std::string entry_dir(const std::string& root) const { return join_path(join_path(root, "cache"), dir_name_); }

  // A valid entry in `root`, if any; a corrupt one is reported, not touched:
  // repairing happens under the key's lock.
  std::optional<BuildOutcome> lookup(const std::string& root) {
    std::string dir = entry_dir(root);
    std::string why;
    auto cubin = read_valid_entry(dir, key_.key, &why);
    if (!cubin) {
      if (!why.empty()) debug_log(diag_, cat("cache entry ", dir, " is invalid: ", why));
      return std::nullopt;
    }
    BuildOutcome hit;
    hit.cubin_path = join_path(dir, "kernel.cubin");
    hit.cubin = std::move(*cubin);
    return hit;
  }

  BuildOutcome finish_hit(BuildOutcome hit) {
    stats_.disk_hits++;
    debug_log(diag_, cat("cache hit for kernel ", src_.name, ": ", hit.cubin_path));
    if (diag_.dump_sass) dump_sass(parent_dir(hit.cubin_path), compiler_);
    return hit;
  }

  BuildOutcome build_in(const std::string& root) {
    explain_miss();
    try {
      prepare_writable_root(root);
    } catch (const Error& e) {
      std::string others = roots_.size() > 1 ? " or any other cache root" : "";
      fail(cat("Kernel ", src_.name, " is not in the JIT cache", others, " for this configuration (",
               compiler_.backend(), " ", one_line(compiler_.short_version()), "), so it must be compiled, but: ",
               e.what(), " A read-only, pre-warmed cache can stay where it is: put a writable directory first, "
               "DG_JIT_CACHE_DIR=/writable/dir:", root, " (DG_JIT_DEBUG=1 says why the entry missed)."));
    }
    FileLock lock(join_path(join_path(root, "locks"), dir_name_ + ".lock"));
    // Someone may have published while we waited for the lock.
    std::string dir = entry_dir(root);
    std::string why;
    if (auto cubin = read_valid_entry(dir, key_.key, &why)) {
      BuildOutcome hit{join_path(dir, "kernel.cubin"), std::move(*cubin), false, false};
      return finish_hit(std::move(hit));
    }
    bool repaired = false;
    if (!why.empty() && file_kind_text(dir) == "a directory" && ::access(dir.c_str(), R_OK | X_OK) != 0 &&
        errno == EACCES) {
      struct stat st{};
      ::stat(dir.c_str(), &st);
      char mode[8];
      std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
      fail(cat("The JIT cache entry ", dir, " exists but this user (uid ", ::getuid(), ") cannot read it (owner uid ",
               st.st_uid, ", mode ", mode, "): it was written by another user with "
               "an older deep_gemm or a restrictive umask. Make the cache readable (chmod -R a+rX ", root,
               ") or use another DG_JIT_CACHE_DIR."));
    }
    if (!why.empty()) {
      debug_log(diag_, cat("moving aside invalid cache entry ", dir, ": ", why));
      quarantine(root, dir);
      stats_.repaired++;
      repaired = true;
    }
    remove_stale_temps(root, diag_);
    BuildOutcome out = compile_and_publish(root);
    out.repaired = repaired;
    return out;
  }

  // On a miss, says once per process (each time with DG_JIT_DEBUG) when the
  // cache holds this kernel built for another configuration: a cache warmed
  // with NVRTC is not used by a runtime that compiles with nvcc, nor the reverse.
  void explain_miss() {
    static std::atomic<bool> said{false};
    if (said.load() && !diag_.debug) return;
    const std::string prefix = sanitize_name(src_.name) + "-";
    std::string other;
    for (const auto& root : roots_) {
      std::string cache_dir = join_path(root, "cache");
      for (const auto& name : list_dir(cache_dir)) {
        if (name.rfind(prefix, 0) != 0 || name.size() != prefix.size() + 32 || name == dir_name_) continue;
        DirFd d(::open(join_path(cache_dir, name).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
        if (d.get() < 0) continue;
        std::string why;
        auto manifest = read_entry_file(d.get(), "manifest", kMaxManifestBytes, &why);
        if (!manifest || manifest_field(*manifest, "name") != src_.name) continue;
        std::string backend = manifest_field(*manifest, "backend");
        std::string version = manifest_field(*manifest, "compiler_version");
        if (backend != compiler_.backend()) {
          other = cat("it holds this kernel built with ", backend, version.empty() ? "" : " " + version,
                      ", but this process compiles with ", compiler_.backend(), " (", compiler_.path(),
                      "); entries are per backend: run with ", backend == "nvrtc" ? "DG_JIT_USE_NVRTC=1" :
                      "the nvcc that warmed the cache (DG_JIT_NVCC_COMPILER)", " to use them, or warm the cache "
                      "with the backend the runtime uses");
          break;
        }
        if (!version.empty() && version != one_line(compiler_.short_version()))
          other = cat("it holds this kernel built by ", backend, " ", version, ", but this process has ",
                      backend, " ", one_line(compiler_.short_version()), "; warm the cache with the runtime's compiler");
        else if (other.empty())
          other = "it holds this kernel built from other inputs (other headers, flags or source)";
      }
      if (!other.empty()) break;
    }
    if (other.empty() || (said.exchange(true) && !diag_.debug)) return;
    log_line(cat("deep_jit: kernel ", src_.name, " missed the JIT cache: ", other, "."));
  }

  BuildOutcome compile_and_publish(const std::string& root) {
    std::string work = make_temp_dir(join_path(root, "tmp"), owned_temp_prefix(dir_name_));
    try {
      std::string cubin = compile_into(root, work);
      BuildOutcome out = publish(root, work, std::move(cubin));
      if (diag_.dump_sass) dump_sass(parent_dir(out.cubin_path), compiler_);
      return out;
    } catch (...) {
      remove_tree(work);
      throw;
    }
  }

  // Runs the compiler in `work`; returns the validated cubin bytes.
  std::string compile_into(const std::string& root, const std::string& work) {
    CompileRequest req;
    req.source = &src_;
    req.flags = flags_;
    req.work_dir = work;
    req.source_path = join_path(work, "kernel.cu");
    req.cubin_path = join_path(work, "kernel.cubin");
    req.diag = diag_;
    write_file(req.source_path, src_.code, "kernel source");
    debug_log(diag_, cat("compiling kernel ", src_.name, " with ", compiler_.backend(), " in ", work));
    auto start = std::chrono::steady_clock::now();
    CompileResult result = compiler_.compile(req);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!result.ok) fail_compile(root, work, result, result.status);
    if (diag_.ptxas_check)
      if (std::string bad = ptxas_check_failure(result.log); !bad.empty())
        fail_compile(root, work, result, "DG_JIT_PTXAS_CHECK: " + bad);
    if (diag_.ptxas_verbose)
      log_line(cat("deep_jit: ptxas report for kernel ", src_.name, ":\n", result.log));
    if (!result.log.empty()) write_file(join_path(work, "compile.log"), result.log, "compile log");
    auto cubin = try_read_file(req.cubin_path);
    if (!cubin || !has_elf_magic(*cubin))
      fail_compile(root, work, result, "the compiler reported success but wrote no valid cubin");
    stats_.compiles++;
    if ((seconds > 1.0 && !quiet_) || diag_.debug)
      log_line(cat("deep_gemm: compiled ", src_.name, " in ", seconds, " s (", compiler_.backend(), ")"));
    write_file(join_path(work, "manifest"), manifest_text(src_, key_.key, compiler_, *cubin), "cache manifest");
    make_tree_public(work);  // nvcc writes the cubin (and --keep files) under the umask
    return std::move(*cubin);
  }

  // Keeps the failing source under failed/ and raises the compiler's message.
  [[noreturn]] void fail_compile(const std::string& root, const std::string& work, const CompileResult& result,
                                 const std::string& reason) {
    stats_.compile_failures++;
    std::string kept = join_path(join_path(root, "failed"), dir_name_);
    std::string log = result.log;
    try {
      write_file(join_path(work, "compile.log"), log, "compile log");
      write_file(join_path(work, "command.txt"), result.command + "\n", "compile command");
    } catch (const Error&) {
    }
    remove_tree(kept);
    std::string where = cat("The source was kept at ", join_path(kept, "kernel.cu"));
    if (::rename(work.c_str(), kept.c_str()) != 0)  // the caller deletes `work`, so do not point there
      where = cat("The source could not be kept at ", kept, " (", errno_text(errno), ")");
    constexpr size_t kMaxLog = 20000;
    if (log.size() > kMaxLog) log = log.substr(0, kMaxLog) + "\n[... output truncated; full log in compile.log]";
    fail(cat("Compiling kernel ", src_.name, " with ", compiler_.backend(), " failed: ", reason, ". ", where,
             ". Compiler output:\n", log));
  }

  // Atomically renames the build directory into place. If another process won
  // the race, its (valid) entry is used and ours is dropped.
  BuildOutcome publish(const std::string& root, const std::string& work, std::string cubin) {
    std::string dir = entry_dir(root);
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (::rename(work.c_str(), dir.c_str()) == 0) {
        debug_log(diag_, cat("published ", dir));
        return BuildOutcome{join_path(dir, "kernel.cubin"), std::move(cubin), true, false};
      }
      int err = errno;
      // EEXIST/ENOTEMPTY: a directory is there; ENOTDIR: something else is in the way.
      if (err != EEXIST && err != ENOTEMPTY && err != ENOTDIR)
        fail(cat("Cannot publish the compiled kernel ", src_.name, " to ", dir, ": ", errno_text(err), "."));
      std::string why;
      if (auto theirs = read_valid_entry(dir, key_.key, &why)) {
        remove_tree(work);
        debug_log(diag_, cat("another process published ", dir, " first; using it"));
        return BuildOutcome{join_path(dir, "kernel.cubin"), std::move(*theirs), true, false};
      }
      quarantine(root, dir);
    }
    fail(cat("Cannot publish the compiled kernel ", src_.name, " to ", dir,
             ": the directory keeps being replaced by an invalid entry."));
  }

  const KernelSource& src_;
  const Compiler& compiler_;
  const std::vector<std::string>& roots_;
  Diagnostics diag_;
  bool quiet_;
  CacheStats& stats_;
  std::vector<std::string> flags_;
  CacheKey key_;
  std::string dir_name_;
};

}  // namespace deep_jit::detail
