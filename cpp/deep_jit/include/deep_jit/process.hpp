// deep_jit: running a compiler as a child process.
//
// Decision 4: compilers run from an argv vector through posix_spawn, never
// through a shell, so paths with spaces or quotes need no escaping and no
// shell is ever involved. stdout and stderr are captured together.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "env.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "hash.hpp"

extern char** environ;

namespace deep_jit::detail {

struct ProcessResult {
  int exit_code = -1;    // valid when term_signal == 0
  int term_signal = 0;   // non-zero when the child was killed by a signal
  std::string output;    // stdout and stderr, interleaved as written

  bool ok() const { return term_signal == 0 && exit_code == 0; }

  std::string status_text() const {
    if (term_signal != 0) return cat("was killed by signal ", term_signal);
    return cat("exited with code ", exit_code);
  }
};

// Renders argv for humans (DG_JIT_PRINT_COMPILER_COMMAND, error messages).
// Arguments are quoted only for display; nothing parses this string.
inline std::string command_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out.push_back(' ');
    bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`;&|<>()*?") == std::string::npos;
    if (plain) {
      out += a;
      continue;
    }
    out.push_back('\'');
    for (char c : a) {
      if (c == '\'') out += "'\\''";
      else out.push_back(c);
    }
    out.push_back('\'');
  }
  return out;
}

// Owns the spawn attribute objects so every exit path releases them.
class SpawnActions {
 public:
  SpawnActions() { posix_spawn_file_actions_init(&actions_); }
  ~SpawnActions() { posix_spawn_file_actions_destroy(&actions_); }
  SpawnActions(const SpawnActions&) = delete;
  SpawnActions& operator=(const SpawnActions&) = delete;
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

inline std::string drain(int fd) {
  std::string out;
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

inline ProcessResult wait_child(pid_t pid, std::string output) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) fail(cat("Waiting for compiler process ", static_cast<long>(pid), " failed: ", errno_text(errno), "."));
  }
  ProcessResult r;
  r.output = std::move(output);
  if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
  else r.exit_code = WEXITSTATUS(status);
  return r;
}

// ---------------------------------------------------------------- processes

// What /proc/<pid>/stat says about a process: state letter, parent, and start
// time (clock ticks after boot; with the pid it names one process for good).
struct ProcStat {
  char state = '?';
  pid_t ppid = 0;
  unsigned long long start = 0;
};

inline std::optional<ProcStat> proc_stat(pid_t pid) {
  auto text = try_read_file(cat("/proc/", static_cast<long>(pid), "/stat"));
  if (!text) return std::nullopt;
  size_t close = text->rfind(')');  // the command name may contain spaces and ')'
  if (close == std::string::npos) return std::nullopt;
  std::vector<std::string> fields = split(std::string_view(*text).substr(close + 1), ' ');
  // fields[0] is field 3 of proc(5) (state), fields[1] field 4 (ppid), fields[19] field 22 (starttime).
  if (fields.size() < 20 || fields[0].empty()) return std::nullopt;
  ProcStat st;
  st.state = fields[0][0];
  st.ppid = static_cast<pid_t>(std::strtol(fields[1].c_str(), nullptr, 10));
  st.start = std::strtoull(fields[19].c_str(), nullptr, 10);
  return st;
}

// True while `pid` exists and has not exited (a zombie counts as dead).
inline bool process_alive(pid_t pid) {
  if (pid <= 0) return false;
  if (auto st = proc_stat(pid)) return st->state != 'Z' && st->state != 'X';
  return ::kill(pid, 0) == 0 || errno == EPERM;  // no /proc: ask the kernel
}

// Identifies this boot of this host and this PID namespace: a process that
// sees the same tag sees the same pids, so it can tell whether the recorded
// owner of a build directory is still alive. "" when /proc cannot tell.
inline std::string pid_space_tag() {
  auto boot = try_read_file("/proc/sys/kernel/random/boot_id");
  char ns[128];
  ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof(ns));
  if (!boot || boot->empty() || n <= 0) return "";
  return sha256_hex(*boot + "|" + std::string(ns, static_cast<size_t>(n))).substr(0, 12);
}

// The name of a private build directory: "<prefix>.<tag>-<pid>", to which
// make_temp_dir appends ".XXXXXX". The tag is "x" when unknown.
inline std::string owned_temp_prefix(std::string_view prefix) {
  std::string tag = pid_space_tag();
  return cat(prefix, ".", tag.empty() ? std::string("x") : tag, "-", static_cast<long>(::getpid()));
}

struct TempOwner {
  std::string tag;
  pid_t pid = 0;
};

// The owner recorded in a name made by owned_temp_prefix + make_temp_dir.
inline std::optional<TempOwner> temp_owner(std::string_view name) {
  if (name.size() < 8 || name[name.size() - 7] != '.') return std::nullopt;
  std::string_view stem = name.substr(0, name.size() - 7);
  size_t dot = stem.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  std::string_view owner = stem.substr(dot + 1);
  size_t dash = owner.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == owner.size()) return std::nullopt;
  std::string_view pid = owner.substr(dash + 1);
  if (pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  return TempOwner{std::string(owner.substr(0, dash)), static_cast<pid_t>(std::strtol(std::string(pid).c_str(), nullptr, 10))};
}

// Kills `pid` and all its descendants, if `pid` is still the process that
// started at `start` (so a reused pid is never hit). It is stopped first so
// that it cannot start new children while they are collected.
inline bool kill_process_tree(pid_t pid, unsigned long long start) {
  auto st = proc_stat(pid);
  if (pid <= 1 || !st || st->start != start || st->state == 'Z' || st->state == 'X') return false;
  ::kill(pid, SIGSTOP);
  std::multimap<pid_t, pid_t> children;
  if (DIR* d = ::opendir("/proc")) {
    while (dirent* e = ::readdir(d)) {
      char* end = nullptr;
      long p = std::strtol(e->d_name, &end, 10);
      if (p <= 0 || !end || *end) continue;
      if (auto cs = proc_stat(static_cast<pid_t>(p))) children.emplace(cs->ppid, static_cast<pid_t>(p));
    }
    ::closedir(d);
  }
  std::vector<pid_t> tree = {pid};
  for (size_t i = 0; i < tree.size(); ++i) {
    auto [lo, hi] = children.equal_range(tree[i]);
    for (auto it = lo; it != hi; ++it) tree.push_back(it->second);
  }
  for (size_t i = tree.size(); i-- > 0;) ::kill(tree[i], SIGKILL);
  return true;
}

// Runs argv[0] (an absolute or relative path, not looked up in PATH) with
// argv, stdin from /dev/null, and returns its exit status and output.
//
// With `pid_file`, the child's pid and start time are written there while it
// runs (and the file removed after): if this process is killed meanwhile,
// whoever finds that file in an abandoned build directory can stop the child
// with kill_process_tree (posix_spawn cannot give it PR_SET_PDEATHSIG).
inline ProcessResult run_process(const std::vector<std::string>& argv, const std::string& pid_file = "") {
  if (argv.empty()) fail("Cannot run a process with an empty command.");
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) fail(cat("Cannot create a pipe to run ", argv[0], ": ", errno_text(errno), "."));
  SpawnActions actions;
  // The pipe is close-on-exec, so children spawned concurrently by other
  // threads do not inherit it (which would keep our read end from seeing EOF).
  posix_spawn_file_actions_addopen(actions.get(), 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(actions.get(), fds[1], 1);
  posix_spawn_file_actions_adddup2(actions.get(), fds[1], 2);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = 0;
  int err = ::posix_spawn(&pid, argv[0].c_str(), actions.get(), nullptr, cargv.data(), environ);
  ::close(fds[1]);
  if (err != 0) {
    ::close(fds[0]);
    fail(cat("Cannot start ", argv[0], ": ", errno_text(err), "."));
  }
  if (!pid_file.empty()) {
    auto st = proc_stat(pid);
    try {
      write_file(pid_file, cat(static_cast<long>(pid), " ", st ? st->start : 0ULL, "\n"), "compiler pid file");
    } catch (const Error&) {
      // Best effort: without the file an abandoned compiler is only not reaped.
    }
  }
  std::string output = drain(fds[0]);
  ::close(fds[0]);
  ProcessResult result = wait_child(pid, std::move(output));
  if (!pid_file.empty()) ::unlink(pid_file.c_str());
  return result;
}

// The first executable `name` in PATH, or "" when there is none.
inline std::string find_in_path(std::string_view name) {
  auto path = env("PATH");
  if (!path) return "";
  for (const auto& dir : split(*path, ':')) {
    std::string candidate = join_path(dir, name);
    if (is_executable_file(candidate)) return candidate;
  }
  return "";
}

}  // namespace deep_jit::detail
