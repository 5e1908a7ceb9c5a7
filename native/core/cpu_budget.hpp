// SPDX-License-Identifier: MIT
// CpuBudget: timeSlice preemption and taskTimeout kills, through a Lua count hook.
#pragma once

#include <cstdint>

#include <lua.hpp>

#include "clock.hpp"

namespace lua_tasks {

// How it works. When either limit is set, every thread of the state runs with
// a count hook (threads inherit it from their creator). Every kHookEvery VM
// instructions the hook reads the monotonic clock:
//  - past the window's slice end, on a task's own thread, it asks the
//    preempt callback to file the task as IMMEDIATE and yields (a hook may
//    yield with no values); elsewhere (a metamethod, a C call) it waits for
//    the next point where it can;
//  - past the deadline, it switches to killing: the hook then fires on every
//    instruction and raises "CPU budget exceeded" each time. pcall can catch
//    one raise, but the very next instruction outside it raises again, so the
//    error always reaches the entry point (the Redis script-kill idea).
// A window is one stretch of Lua execution: a task's resume, or a call from
// JS. Windows nest (task -> JS -> Lua, task -> tasks.start); an inner window
// keeps the outer deadline.
class CpuBudget {
 public:
  static constexpr int kHookEvery = 1000;

  // Returns true if the running task on L was filed to yield as IMMEDIATE.
  using PreemptFn = bool (*)(void* ctx, lua_State* L);

  CpuBudget(const Clock* clock, int64_t slice_ns, int64_t timeout_ns)
      : clock_(clock), slice_ns_(slice_ns), timeout_ns_(timeout_ns) {}

  bool enabled() const { return slice_ns_ > 0 || timeout_ns_ > 0; }
  int64_t timeout_ns() const { return timeout_ns_; }
  int64_t slice_ns() const { return slice_ns_; }
  void set_preempt(PreemptFn fn, void* ctx) {
    preempt_ = fn;
    preempt_ctx_ = ctx;
  }
  // Sets the hook on L (call for the main thread at creation).
  void Install(lua_State* L) const;

  struct Window {
    int64_t start = 0;
    int64_t deadline = 0;   // 0 = none
    int64_t slice_end = 0;  // 0 = not preemptible
    bool killing = false;
    bool active = false;
  };
  // Opens a window. `used_ns` is CPU time the task already spent (0 for a
  // call from JS); `task` makes it preemptible. Returns the window it hides.
  // `now` is the monotonic time, when the caller has just read it.
  Window Open(int64_t used_ns, bool task, int64_t now);
  Window Open(int64_t used_ns, bool task) { return Open(used_ns, task, clock_->MonoNs()); }
  // Closes the current window, restoring `outer`. Returns the nanoseconds it
  // ran and sets *killed if it was killed.
  int64_t Close(const Window& outer, bool* killed, int64_t now);
  int64_t Close(const Window& outer, bool* killed) { return Close(outer, killed, clock_->MonoNs()); }

  // For long C calls the hook cannot reach (our pattern matcher asks this
  // every thousand steps): reads the clock and returns true, switching to
  // killing, once the current window's deadline has passed.
  bool DeadlinePassed();
  // Raises the kill on L, as the hook does: the message, the killed mark on a
  // non-main thread, and a hook on every instruction from now on, so the kill
  // goes on reaching the entry point past any pcall. Never returns.
  int RaiseKill(lua_State* L);

  bool killing() const { return window_.killing; }
  // Called from LuaHost::Hook, the count hook every thread runs under.
  void OnHook(lua_State* L);
  bool active() const { return window_.active; }
  uint64_t preemptions() const { return preemptions_; }

 private:
  const Clock* clock_;
  int64_t slice_ns_;
  int64_t timeout_ns_;
  PreemptFn preempt_ = nullptr;
  void* preempt_ctx_ = nullptr;
  Window window_;
  uint64_t preemptions_ = 0;
};

}  // namespace lua_tasks
