// SPDX-License-Identifier: MIT
// CpuBudget: timeSlice preemption and taskTimeout kills, through a Lua count hook.
#pragma once

#include <cstddef>
#include <cstdint>

#include <lua.hpp>

#include "core/base/clock.hpp"

namespace lua_tasks {

// How it works. When either limit is set, every thread of the state runs with
// a count hook (threads inherit it from their creator). Every few VM
// instructions (at most kHookEvery) the hook reads the monotonic clock:
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
// keeps the outer deadline, also one already passed: nothing run
// synchronously outlasts the budget of the code that ran it.
//
// Nothing synchronous outlives the budget. The count is per thread, and Lua
// gives a new thread a fresh one, so these points also bring a thread in
// line (Sync) when it starts or goes back to running:
//  - a task's resume, coroutine.resume, a call from JS, and the return from
//    each: once a kill is under way, the thread's next instruction raises
//    (so code after a killed coroutine, or a killed task it started, cannot
//    go on for up to kHookEvery more instructions);
//  - a nested window reads the clock when it opens, and coroutine.resume
//    every kResumeCheck resumes: a tree of tasks or coroutines that each run
//    a few instructions (never reaching a hook) still stops at the deadline.
//
// Expensive single instructions. A count of instructions stands for time
// only while instructions are cheap; a few are not:
//  - comparing or hashing long strings (one `a == b` on 16 MB strings takes
//    about a millisecond): while the state holds strings of kBigString bytes
//    or more, the count is capped so that a run of such instructions cannot
//    pass cap_target_ unchecked (Cap);
//  - large allocations (a concatenation, a table's resize, a full collection
//    when an allocation fails at memoryLimit), and long C functions (which
//    meter their own work, see WorkMeter): they Charge the running thread,
//    whose next instruction then runs the hook;
//  - the hook measures the time since the last one and shrinks the count
//    when instructions turn out slow (adapt_target_), growing it back by
//    doublings when they are fast again. Cheap code never sees any of this:
//    its count stays kHookEvery.
class CpuBudget {
 public:
  static constexpr int kHookEvery = 1000;
  // Strings this long count towards the cap (see Cap).
  static constexpr size_t kBigString = size_t{256} << 10;
  // Time one instruction may take per byte of big strings the state holds:
  // a compare runs at about 0.05 ns a byte here; twice that, for margin.
  static constexpr double kNsPerBigByte = 0.1;
  // coroutine.resume reads the clock once every this many resumes.
  static constexpr unsigned kResumeCheck = 64;

  // Returns true if the running task on L was filed to yield as IMMEDIATE.
  using PreemptFn = bool (*)(void* ctx, lua_State* L);

  // `big_string_bytes` (may be null): the bytes the state holds in strings of
  // kBigString or more (MemoryBudget::big_strings); must outlive the budget.
  CpuBudget(const Clock* clock, int64_t slice_ns, int64_t timeout_ns, const size_t* big_string_bytes = nullptr);

  bool enabled() const { return slice_ns_ > 0 || timeout_ns_ > 0; }
  int64_t timeout_ns() const { return timeout_ns_; }
  int64_t slice_ns() const { return slice_ns_; }
  void set_preempt(PreemptFn fn, void* ctx) {
    preempt_ = fn;
    preempt_ctx_ = ctx;
  }
  // Sets the hook on L (call for the main thread at creation, and after a
  // kill that left it a hook on every instruction).
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
  // Opens a window, outside any, for scheduler work that runs several tasks
  // back to back: no deadline of its own (each task keeps its budget), but
  // one slice for them all (their windows nest: see Open).
  Window OpenShared(int64_t now);
  // Closes the current window, restoring `outer`. Returns the nanoseconds it
  // ran and sets *killed if it was killed. A kill that came from the outer
  // deadline (or one already under way outside) goes on outside.
  int64_t Close(const Window& outer, bool* killed, int64_t now);
  int64_t Close(const Window& outer, bool* killed) { return Close(outer, killed, clock_->MonoNs()); }

  // The stop check of long C functions (through LuaHost::StopDue): reads the
  // clock and returns true, switching to killing, once the current window's
  // deadline has passed. Without a deadline it reads no clock.
  bool StopDue();
  // Raises the kill on L, as the hook does: the message, the killed mark on a
  // non-main thread, and a hook on every instruction from now on, so the kill
  // goes on reaching the entry point past any pcall. Never returns.
  int RaiseKill(lua_State* L);

  // L starts or goes back to running Lua code in the current window: it gets
  // a hook on its next instruction while a kill is under way, else a count
  // no larger than the current one. Never raises (safe from any C code).
  void Sync(lua_State* L) {
    if (!window_.active) return;
    int want = window_.killing ? 1 : every_;
    if (big_string_bytes_ != nullptr && *big_string_bytes_ != 0) want = want < Cap() ? want : Cap();
    // No thread's count is ever above kHookEvery: the common case costs no
    // call into Lua (every task wake comes here).
    if (want < kHookEvery && lua_gethookcount(L) > want) lua_sethook(L, Hook, LUA_MASKCOUNT, want);
  }
  // coroutine.resume is about to run `co`: every kResumeCheck resumes the
  // clock is read (see the class comment), then co is brought in line.
  void EnterCoroutine(lua_State* co) {
    if (!window_.active) return;
    if (++resumes_ % kResumeCheck == 0) StopDue();
    Sync(co);
  }
  // Work L just did took time its count does not see (a large allocation, a
  // long C call): its next instruction runs the hook, which measures it.
  // Never raises; safe inside the allocator (lua_sethook is async-safe).
  void Charge(lua_State* L) {
    if (window_.active && lua_gethookcount(L) > 1) lua_sethook(L, Hook, LUA_MASKCOUNT, 1);
  }

  bool killing() const { return window_.killing; }
  // The count hook every thread runs under: LuaHost::Hook, which looks at an
  // interrupt first and then calls OnHook.
  static void Hook(lua_State* L, lua_Debug* ar);
  void OnHook(lua_State* L);
  bool active() const { return window_.active; }
  uint64_t preemptions() const { return preemptions_; }
  // The count threads are brought to now (kHookEvery while code is cheap).
  int hook_every() const { return every_; }
  // The largest count allowed while the state holds its big strings (made
  // by Lua code or handed in from JS).
  int Cap() const;

 private:
  // Sets the next count for L from the time since the last hook.
  void Adapt(lua_State* L, int64_t now);

  const Clock* clock_;
  int64_t slice_ns_;
  int64_t timeout_ns_;
  // The hook aims at no more than this between two clock reads: an eighth of
  // the taskTimeout (or half the timeSlice, when only that is set).
  int64_t adapt_target_ns_;
  int64_t cap_target_ns_;           // an eighth of the taskTimeout; 0 = no cap
  const size_t* big_string_bytes_;  // see the constructor; may be null
  PreemptFn preempt_ = nullptr;
  void* preempt_ctx_ = nullptr;
  Window window_;
  int every_ = kHookEvery;
  int64_t last_hook_ns_ = 0;  // when the hook last read the clock (or the outermost window opened)
  unsigned resumes_ = 0;
  uint64_t preemptions_ = 0;
};

}  // namespace lua_tasks
