// SPDX-License-Identifier: MIT
// CpuBudget: timeSlice preemption and taskTimeout kills, through a Lua count hook.
#include "core/limits/cpu_budget.hpp"

#include <algorithm>

#include "core/host/lua_host.hpp"

namespace lua_tasks {

CpuBudget::CpuBudget(const Clock* clock, int64_t slice_ns, int64_t timeout_ns, const size_t* big_string_bytes)
    : clock_(clock),
      slice_ns_(slice_ns),
      timeout_ns_(timeout_ns),
      adapt_target_ns_(0),
      cap_target_ns_(timeout_ns > 0 ? std::max<int64_t>(timeout_ns / 8, 1) : 0),
      big_string_bytes_(big_string_bytes) {
  if (timeout_ns_ > 0) adapt_target_ns_ = cap_target_ns_;
  if (slice_ns_ > 0 && (adapt_target_ns_ == 0 || slice_ns_ / 2 < adapt_target_ns_)) {
    adapt_target_ns_ = std::max<int64_t>(slice_ns_ / 2, 1);
  }
}

void CpuBudget::Install(lua_State* L) const {
  if (enabled()) lua_sethook(L, Hook, LUA_MASKCOUNT, every_);
}

CpuBudget::Window CpuBudget::Open(int64_t used_ns, bool task, int64_t now) {
  const Window outer = window_;
  Window w;
  w.active = true;
  w.start = now;
  if (outer.active) {
    // Nested (task -> JS -> Lua, or a task started or resumed from a task):
    // the outer limits still hold, so nothing run synchronously outlasts
    // the outer deadline, also when it has passed already: a task started
    // by code being killed is killed at its first instruction. A task keeps
    // its own budget too, when that ends first. The clock is read here, so
    // tasks that each run a few instructions before starting the next still
    // meet the deadline.
    w.deadline = outer.deadline;
    if (task && timeout_ns_ > 0) {
      const int64_t own = now + (timeout_ns_ > used_ns ? timeout_ns_ - used_ns : 1);
      if (w.deadline == 0 || own < w.deadline) w.deadline = own;
    }
    // Preemptible too, by the end of the outer slice if there is one: made
    // to yield, a task started or resumed from Lua returns to its starter as
    // if it had yielded (with a timeSlice alone, tasks.start(spin) from a
    // task held the loop for ever).
    w.slice_end = task && slice_ns_ > 0 ? (outer.slice_end != 0 ? outer.slice_end : now + slice_ns_) : 0;
    w.killing = outer.killing || (w.deadline != 0 && now >= w.deadline);
  } else {
    if (timeout_ns_ > 0) w.deadline = now + (timeout_ns_ > used_ns ? timeout_ns_ - used_ns : 1);
    if (task && slice_ns_ > 0) w.slice_end = now + slice_ns_;
    last_hook_ns_ = now;
  }
  window_ = w;
  return outer;
}

CpuBudget::Window CpuBudget::OpenShared(int64_t now) {
  const Window outer = window_;
  Window w;
  w.active = true;
  w.start = now;
  w.slice_end = slice_ns_ > 0 ? now + slice_ns_ : 0;
  last_hook_ns_ = now;
  window_ = w;
  return outer;
}

int64_t CpuBudget::Close(const Window& outer, bool* killed, int64_t now) {
  const int64_t ran = now - window_.start;
  *killed = window_.killing;
  window_ = outer;
  // Keep killing up to the entry point, when the kill was the outer
  // deadline's (a task killed for its own budget, inside another task's
  // window, ends alone).
  if (outer.active && *killed && (outer.deadline != 0 && now >= outer.deadline)) window_.killing = true;
  return ran;
}

// One hook function for every thread: the host's, which looks at an interrupt
// first (interrupt_watch.hpp), then calls OnHook.
void CpuBudget::Hook(lua_State* L, lua_Debug* ar) {
  LuaHost::Hook(L, ar);
}

bool CpuBudget::StopDue() {
  if (!window_.active) return false;
  if (!window_.killing && window_.deadline != 0 && clock_->MonoNs() >= window_.deadline) window_.killing = true;
  return window_.killing;
}

int CpuBudget::Cap() const {
  if (cap_target_ns_ == 0 || big_string_bytes_ == nullptr) return kHookEvery;
  const size_t big = *big_string_bytes_;
  if (big == 0) return kHookEvery;
  const double per_instruction = static_cast<double>(big) * kNsPerBigByte;
  const double cap = static_cast<double>(cap_target_ns_) / per_instruction;
  if (cap >= kHookEvery) return kHookEvery;
  return cap < 1 ? 1 : static_cast<int>(cap);
}

void CpuBudget::Adapt(lua_State* L, int64_t now) {
  const int64_t elapsed = now - last_hook_ns_;
  last_hook_ns_ = now;
  const int count = lua_gethookcount(L);
  int next;
  if (elapsed > adapt_target_ns_) {
    // Instructions cost elapsed/count each: aim at half the target.
    const int64_t n = static_cast<int64_t>(count) * adapt_target_ns_ / (2 * elapsed);
    next = n < 1 ? 1 : static_cast<int>(n);
  } else {
    next = every_ >= kHookEvery / 2 ? kHookEvery : every_ * 2;
  }
  next = std::min(next, Cap());
  every_ = next;
  if (count != next) lua_sethook(L, Hook, LUA_MASKCOUNT, next);
}

void CpuBudget::OnHook(lua_State* L) {
  if (!window_.active) return;
  if (!window_.killing) {
    const int64_t now = clock_->MonoNs();
    if (window_.deadline != 0 && now >= window_.deadline) {
      window_.killing = true;
    } else {
      Adapt(L, now);
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
