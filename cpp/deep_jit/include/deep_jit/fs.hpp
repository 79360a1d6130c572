// deep_jit: the few file-system operations the cache needs, each turning an
// OS failure into an Error that names the path and the reason.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "error.hpp"

namespace deep_jit::detail {

inline std::string errno_text(int err) { return std::generic_category().message(err); }

inline std::string join_path(std::string_view a, std::string_view b) {
  if (a.empty()) return std::string(b);
  std::string out(a);
  if (out.back() != '/') out.push_back('/');
  out.append(b);
  return out;
}

inline std::string parent_dir(std::string_view path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

inline bool is_dir(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

inline bool is_file(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

inline bool is_executable_file(const std::string& path) { return is_file(path) && ::access(path.c_str(), X_OK) == 0; }

// What is at `path`, not following a final symbolic link, for messages:
// "missing", "a regular file", "a directory", "a symbolic link", "a FIFO", ...
inline std::string file_kind_text(const std::string& path) {
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0) return "missing";
  if (S_ISREG(st.st_mode)) return "a regular file";
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISLNK(st.st_mode)) return "a symbolic link";
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  return "a device";
}

// Reads the regular file open on `fd` (closing it), at most `max_bytes`.
// Nothing when `fd` is not a regular file, holds more than `max_bytes` or a
// read fails; `why` (if given) then says which.
inline std::optional<std::string> read_open_regular(int fd, size_t max_bytes, std::string* why) {
  auto give_up = [&](std::string reason) -> std::optional<std::string> {
    ::close(fd);
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  struct stat st{};
  if (::fstat(fd, &st) != 0) return give_up(errno_text(errno));
  if (!S_ISREG(st.st_mode)) return give_up("not a regular file");
  if (static_cast<unsigned long long>(st.st_size) > max_bytes)
    return give_up(cat("it has ", st.st_size, " bytes, more than the ", max_bytes, " expected"));
  std::string data;
  data.reserve(static_cast<size_t>(st.st_size));
  char buf[65536];
  for (;;) {
    size_t room = max_bytes + 1 - data.size();  // one more byte tells a file that grew
    ssize_t n = ::read(fd, buf, room < sizeof(buf) ? room : sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return give_up(errno_text(errno));
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
    if (data.size() > max_bytes) return give_up(cat("it grew past the ", max_bytes, " bytes expected"));
  }
  ::close(fd);
  return data;
}

inline constexpr size_t kMaxReadBytes = size_t(1) << 30;

// Reads a whole regular file (following links; a FIFO or device is refused
// without blocking on it); nothing when it cannot be read.
inline std::optional<std::string> try_read_file(const std::string& path, std::string* why = nullptr) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (why) *why = errno_text(errno);
    return std::nullopt;
  }
  return read_open_regular(fd, kMaxReadBytes, why);
}

inline std::string read_file(const std::string& path) {
  std::string why;
  auto data = try_read_file(path, &why);
  if (!data) fail(cat("Cannot read the file ", path, ": ", why, "."));
  return *data;
}

// Cache files and directories get these modes whatever the umask (fchmod and
// chmod ignore it): a cache warmed by one user, e.g. root building an image,
// must be readable by every user who can read its root.
inline constexpr mode_t kPublicFileMode = 0644;
inline constexpr mode_t kPublicDirMode = 0755;

// Writes (replacing) a file, mode 0644; `what` says what the file is, for the message.
inline void write_file(const std::string& path, std::string_view data, std::string_view what = "file") {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, kPublicFileMode);
  if (fd < 0) fail(cat("Cannot create the ", what, " ", path, ": ", errno_text(errno), "."));
  ::fchmod(fd, kPublicFileMode);  // best effort: only the owner may, and we created it
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      fail(cat("Cannot write the ", what, " ", path, ": ", errno_text(err), "."));
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) fail(cat("Cannot finish writing the ", what, " ", path, ": ", errno_text(errno), "."));
}

// Creates `path` and its parents; `what` names the directory's role.
inline void make_dirs(const std::string& path, std::string_view what) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec || !is_dir(path))
    fail(cat("Cannot create the ", what, " ", path, ": ", ec ? ec.message() : std::string("not a directory"), "."));
}

// Creates `path` and its missing parents, each new one with mode 0755 whatever
// the umask; existing directories keep their mode. Sets `ec` on failure.
inline void make_public_dirs(const std::string& path, std::error_code& ec) {
  ec.clear();
  std::filesystem::path so_far;
  for (const auto& part : std::filesystem::path(path).lexically_normal()) {
    so_far /= part;
    if (part.empty() || part == "/") continue;
    const std::string p = so_far.string();
    if (::mkdir(p.c_str(), kPublicDirMode) == 0) {
      ::chmod(p.c_str(), kPublicDirMode);
    } else if (errno != EEXIST) {
      ec = std::error_code(errno, std::generic_category());
      return;
    }
  }
}

// Creates a fresh, uniquely named directory inside `parent`, mode 0755 (mkdtemp
// makes it 0700, and it becomes a cache entry by rename).
inline std::string make_temp_dir(const std::string& parent, std::string_view prefix) {
  std::string templ = join_path(parent, cat(prefix, ".XXXXXX"));
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data()))
    fail(cat("Cannot create a temporary build directory in ", parent, ": ", errno_text(errno), "."));
  ::chmod(buf.data(), kPublicDirMode);
  return std::string(buf.data());
}

// Best effort: used for cleanup, where a failure must not hide the real error.
inline void remove_tree(const std::string& path) noexcept {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

inline std::vector<std::string> list_dir(const std::string& path) {
  std::vector<std::string> names;
  DIR* d = ::opendir(path.c_str());
  if (!d) return names;
  while (dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  ::closedir(d);
  return names;
}

// `path` with every symbolic link resolved (realpath), or `path` itself when it
// cannot be resolved.
inline std::string canonical_path(const std::string& path) {
  std::error_code ec;
  auto real = std::filesystem::canonical(path, ec);
  return ec ? path : real.string();
}

inline std::string absolute_path(const std::string& path) {
  std::error_code ec;
  auto abs = std::filesystem::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

// Identity of a file's current contents, cheap to read: used to memoise hashes.
struct FileStamp {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  long long mtime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};

inline std::optional<FileStamp> file_stamp(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return FileStamp{st.st_dev, st.st_ino, st.st_size,
                   static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec};
}

// Seconds since the last modification of `path`, or -1 when it is gone.
inline double age_seconds(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return std::difftime(std::time(nullptr), st.st_mtim.tv_sec);
}

}  // namespace deep_jit::detail
