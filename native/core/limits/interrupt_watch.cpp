// SPDX-License-Identifier: MIT
// InterruptWatch: lets the embedder stop Lua that runs on a thread, even with no limit set.
#include "core/limits/interrupt_watch.hpp"

#include <signal.h>

#include <algorithm>

#include "core/host/lua_host.hpp"

namespace lua_tasks {

namespace {

// The watch of this thread, for the signal handler, which can take no
// argument. Set before the watchdog can send anything, so the handler never
// touches this thread-local for the first time (a first touch may allocate).
thread_local InterruptWatch* tl_watch = nullptr;
thread_local std::weak_ptr<InterruptWatch> tl_owner;

void OnSignal(int) {
  const int saved = errno;
  if (InterruptWatch* w = tl_watch) w->InterruptRunning();
  errno = saved;
}

// A real-time signal nothing in Node or libuv uses. Installed once for the
// process: a signal's handler belongs to the process, whatever thread asks.
int InstallSignal() {
  static const int sig = [] {
    for (int s = SIGRTMIN + 4; s <= SIGRTMAX - 4; ++s) {
      struct sigaction old {};
      if (sigaction(s, nullptr, &old) != 0) continue;
      if (old.sa_handler != SIG_DFL) continue;  // someone else's: leave it
      struct sigaction sa {};
      sa.sa_handler = OnSignal;
      sa.sa_flags = SA_RESTART;
      sigemptyset(&sa.sa_mask);
      if (sigaction(s, &sa, nullptr) == 0) return s;
    }
    return 0;
  }();
  return sig;
}

}  // namespace

int InterruptWatch::Signal() {
  return InstallSignal();
}

std::shared_ptr<InterruptWatch> InterruptWatch::ForThisThread() {
  if (std::shared_ptr<InterruptWatch> w = tl_owner.lock()) return w;
  std::shared_ptr<InterruptWatch> w(new InterruptWatch());
  tl_owner = w;
  return w;
}

InterruptWatch::InterruptWatch() : owner_(pthread_self()) {
  tl_watch = this;
  if (InstallSignal() != 0) thread_ = std::thread([this] { Run(); });
}

InterruptWatch::~InterruptWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (tl_watch == this) tl_watch = nullptr;
}

void InterruptWatch::Add(LuaHost* host) {
  std::lock_guard<std::mutex> lock(mu_);
  changing_ = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  hosts_.push_back(host);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  changing_ = 0;
}

void InterruptWatch::Remove(LuaHost* host) {
  std::lock_guard<std::mutex> lock(mu_);
  changing_ = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  hosts_.erase(std::remove(hosts_.begin(), hosts_.end(), host), hosts_.end());
  std::atomic_signal_fence(std::memory_order_seq_cst);
  changing_ = 0;
}

void InterruptWatch::InterruptRunning() noexcept {
  if (changing_ != 0) return;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  for (LuaHost* host : hosts_) {
    if (host->RunningLua()) host->RequestInterrupt();
  }
}

bool InterruptWatch::AnyRunningLua() {
  for (LuaHost* host : hosts_) {
    if (host->RunningLua()) return true;
  }
  return false;
}

void InterruptWatch::Run() {
  const int sig = InstallSignal();
  std::unique_lock<std::mutex> lock(mu_);
  bool before = false;
  while (!wake_.wait_for(lock, kPeriod, [this] { return stop_; })) {
    const bool now = AnyRunningLua();
    // Seen in Lua at two samples in a row: it may be stuck there. (It may
    // also be a busy loop of short entries; the check then costs one hook.)
    if (now && before) pthread_kill(owner_, sig);
    before = now;
  }
}

}  // namespace lua_tasks
