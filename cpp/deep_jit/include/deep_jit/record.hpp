// deep_jit: DG_JIT_RECORD=path appends every kernel a process builds or loads
// to `path`, one JSON line each with what its cache key is made of (name,
// entry, source, options, backend and the key's digests; never the cubin).
// A warmup tool replays the file elsewhere, e.g. on a build machine without a
// GPU, to compile exactly those kernels into a cache an image then ships.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cache.hpp"
#include "compiler.hpp"
#include "error.hpp"
#include "fork.hpp"
#include "fs.hpp"
#include "types.hpp"

namespace deep_jit::detail {

inline constexpr int kRecordVersion = 1;

inline std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  return out + "\"";
}

inline std::string json_strings(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out.push_back(',');
    out += json_string(items[i]);
  }
  return out + "]";
}

inline std::string record_line(const KernelSource& src, const Compiler& compiler, const CacheKey& key) {
  const CompileOptions& o = src.options;
  return cat("{\"v\":", kRecordVersion, ",\"name\":", json_string(src.name), ",\"entry\":", json_string(src.entry),
             ",\"arch\":", json_string(o.arch), ",\"cpp_std\":", json_string(o.cpp_std), ",\"opt_level\":", o.opt_level,
             ",\"line_info\":", o.line_info ? "true" : "false", ",\"include_dirs\":", json_strings(o.include_dirs),
             ",\"defines\":", json_strings(o.defines), ",\"extra_flags\":", json_strings(o.extra_flags),
             ",\"backend\":", json_string(compiler.backend()), ",\"compiler\":",
             json_string(one_line(compiler.short_version())), ",\"key\":", json_string(key.key),
             ",\"key_compiler\":", json_string(key.compiler), ",\"key_flags\":", json_string(key.flags),
             ",\"key_includes\":", json_string(key.includes), ",\"code\":", json_string(src.code), "}\n");
}

class KernelRecorder {
 public:
  static KernelRecorder& get() {
    static KernelRecorder* r = new KernelRecorder();  // never destroyed: registered with ForkSafety
    return *r;
  }

  // Appends `src` to `path` unless this process (or, for keys already in the
  // file, any earlier one) recorded its key there. One write(2) per line under
  // flock, so processes recording into one file (ranks of a server) do not
  // interleave.
  void record(const std::string& path, const KernelSource& src, const Compiler& compiler, const CacheKey& key) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!scanned_.count(path)) {
      scanned_.insert(path);
      if (auto text = try_read_file(path)) seed_keys(path, *text);
    }
    if (!seen_.insert(path + "\n" + key.key).second) return;
    std::string line = record_line(src, compiler, key);
    // A file we create gets 0644 whatever the umask (the warmup may run as another user).
    int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, kPublicFileMode);
    if (fd >= 0) ::fchmod(fd, kPublicFileMode);
    else if (errno == EEXIST) fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, kPublicFileMode);
    if (fd < 0)
      fail(cat("DG_JIT_RECORD is set to ", path, ", which cannot be opened for appending: ", errno_text(errno),
               "; unset it or point it at a writable file."));
    while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
    }
    size_t done = 0;
    int err = 0;
    while (done < line.size()) {
      ssize_t n = ::write(fd, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        err = errno;
        break;
      }
      done += static_cast<size_t>(n);
    }
    ::close(fd);
    if (err) fail(cat("Cannot append to the DG_JIT_RECORD file ", path, ": ", errno_text(err), "."));
  }

 private:
  KernelRecorder() { ForkSafety::get().protect(&mu_); }

  void seed_keys(const std::string& path, std::string_view text) {
    constexpr std::string_view needle = "\"key\":\"";
    for (size_t at = text.find(needle); at != std::string_view::npos; at = text.find(needle, at + 1)) {
      std::string_view hex = text.substr(at + needle.size(), 64);
      if (hex.size() == 64) seen_.insert(path + "\n" + std::string(hex));
    }
  }

  std::mutex mu_;
  std::set<std::string> scanned_;
  std::set<std::string> seen_;  // "<path>\n<key>"
};

}  // namespace deep_jit::detail
