// deep_jit: running a compiler as a child process.
//
// Decision 4: compilers run from an argv vector through posix_spawn, never
// through a shell, so paths with spaces or quotes need no escaping and no
// shell is ever involved. stdout and stderr are captured together.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <string_view>
#include <vector>

#include "env.hpp"
#include "error.hpp"
#include "fs.hpp"

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

// Runs argv[0] (an absolute or relative path, not looked up in PATH) with
// argv, stdin from /dev/null, and returns its exit status and output.
inline ProcessResult run_process(const std::vector<std::string>& argv) {
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
  std::string output = drain(fds[0]);
  ::close(fds[0]);
  return wait_child(pid, std::move(output));
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
