// SPDX-License-Identifier: MIT
// CpuBudget: timeSlice preemption and taskTimeout kills, through a Lua count hook.
#include "cpu_budget.hpp"

#include "lua_host.hpp"

namespace lua_tasks {

void CpuBudget::Install(lua_State* L) const {
  if (enabled()) lua_sethook(L, LuaHost::Hook, LUA_MASKCOUNT, kHookEvery);
}

CpuBudget::Window CpuBudget::Open(int64_t used_ns, bool task, int64_t now) {
  const Window outer = window_;
  Window w;
  w.active = true;
  w.start = now;
  if (outer.active) {
    // Nested (task -> JS -> Lua, or a task started from a task): the outer
    // limits still hold, so nothing run synchronously outlasts the outer
    // deadline. A call from JS inherits a kill under way at once; a task
    // started by code being killed (a kill swallowed in a nested coroutine)
    // is not that code, and may still yield before its first hook finds the
    // deadline passed (it had started every util.async next tick dead).
    w.deadline = outer.deadline;
    w.slice_end = 0;
    w.killing = outer.killing && !task;
  } else {
    if (timeout_ns_ > 0) w.deadline = now + (timeout_ns_ > used_ns ? timeout_ns_ - used_ns : 1);
    if (task && slice_ns_ > 0) w.slice_end = now + slice_ns_;
  }
  window_ = w;
  return outer;
}

int64_t CpuBudget::Close(const Window& outer, bool* killed, int64_t now) {
  const int64_t ran = now - window_.start;
  *killed = window_.killing;
  window_ = outer;
  if (outer.active && *killed) window_.killing = true;  // keep killing up to the entry point
  return ran;
}

bool CpuBudget::DeadlinePassed() {
  if (!window_.active) return false;
  if (!window_.killing && window_.deadline != 0 && clock_->MonoNs() >= window_.deadline) window_.killing = true;
  return window_.killing;
}

void CpuBudget::OnHook(lua_State* L) {
  if (!window_.active) return;
  if (!window_.killing) {
    const int64_t now = clock_->MonoNs();
    if (window_.deadline != 0 && now >= window_.deadline) {
      window_.killing = true;
    } else {
      if (window_.slice_end != 0 && now >= window_.slice_end && lua_isyieldable(L) && preempt_ != nullptr &&
          preempt_(preempt_ctx_, L)) {
        ++preemptions_;
        window_.slice_end = 0;
        lua_yield(L, 0);  // a count hook may yield, with no values
      }
      return;
    }
  }
  RaiseKill(L);
}

int CpuBudget::RaiseKill(lua_State* L) {
  lua_sethook(L, LuaHost::Hook, LUA_MASKCOUNT, 1);  // from now on, every instruction
  // Raised from a hook, the kill leaves L with hooks off for good (Lua does
  // not turn them back on in a coroutine that dies of it): the mark keeps
  // its <close> handlers from being run later, where nothing could stop them.
  // (Not the main thread: new coroutines copy its extra space, and a kill
  // there is inside a protected call, which turns hooks back on.) Raised
  // from a C function instead, hooks stay on, but the coroutine is marked
  // alike: a killed coroutine is one kind, whatever raised the kill.
  if (L != LuaHost::From(L)->main()) LuaHost::SetKilledMark(L);
  return luaL_error(L, "CPU budget exceeded (taskTimeout %d ms)", static_cast<int>(timeout_ns_ / 1000000));
}

}  // namespace lua_tasks
