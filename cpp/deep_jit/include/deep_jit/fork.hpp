// deep_jit: staying usable in a child forked while other threads of the
// parent are inside deep_jit (serving engines fork workers at any time).
//
// Two things would otherwise be inherited in a state the child can never
// leave, because the threads that would release them do not exist there:
// - a per-key flock(2): the lock belongs to the open file description, which
//   the child shares through its copy of the descriptor, so the child's own
//   flock on that key waits for itself forever;
// - an in-process mutex a parent thread held at the moment of fork().
//
// pthread_atfork handlers deal with both: before fork() every registered
// mutex is taken (so no thread is inside one of them and what they guard is
// consistent), after it they are released in parent and child, and the child
// closes the lock descriptors it inherited. Mutexes registered here must be
// held only briefly and never while taking another registered one.
// posix_spawn (how compilers are started) runs no atfork handlers.
#pragma once

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <vector>

namespace deep_jit::detail {

class ForkSafety {
 public:
  static ForkSafety& get() {
    static ForkSafety* instance = new ForkSafety();  // never destroyed: handlers may run until exit
    return *instance;
  }

  // Registers a mutex that lives until exit.
  void protect(std::mutex* m) {
    std::lock_guard<std::mutex> lock(registry_mu_);
    mutexes_.push_back(m);
  }

  // Runs `open_fn` (returning a descriptor or -1) and records the descriptor
  // as one a forked child must close. Under the mutex, so that a fork()
  // never sees a descriptor that is open but not yet recorded.
  template <class OpenFn>
  int open_tracked(OpenFn&& open_fn) {
    std::lock_guard<std::mutex> lock(fds_mu_);
    int fd = open_fn();
    if (fd >= 0) fds_.push_back(fd);
    return fd;
  }

  // Closes a descriptor from open_tracked(). In a forked child whose handler
  // already closed it, it is no longer recorded and is left alone (its
  // number may have been reused).
  void close_tracked(int fd) {
    std::lock_guard<std::mutex> lock(fds_mu_);
    auto it = std::find(fds_.begin(), fds_.end(), fd);
    if (it == fds_.end()) return;
    fds_.erase(it);
    ::close(fd);
  }

 private:
  ForkSafety() {
    self_ = this;
    ::pthread_atfork(&prepare, &in_parent, &in_child);
  }

  static void prepare() {
    ForkSafety& s = *self_;
    s.registry_mu_.lock();
    for (std::mutex* m : s.mutexes_) m->lock();
    s.fds_mu_.lock();
  }

  static void release(ForkSafety& s) {
    s.fds_mu_.unlock();
    for (auto it = s.mutexes_.rbegin(); it != s.mutexes_.rend(); ++it) (*it)->unlock();
    s.registry_mu_.unlock();
  }

  static void in_parent() { release(*self_); }

  static void in_child() {
    ForkSafety& s = *self_;
    for (int fd : s.fds_) ::close(fd);  // drops our share of the parent's locks
    s.fds_.clear();
    release(s);
  }

  static inline ForkSafety* self_ = nullptr;
  std::mutex registry_mu_;
  std::vector<std::mutex*> mutexes_;
  std::mutex fds_mu_;
  std::vector<int> fds_;
};

}  // namespace deep_jit::detail
