// SPDX-License-Identifier: MIT
// Scheduler::RunCoroutine: one run of a coroutine under the CPU budget of the task it belongs to.
#pragma once

#include "core/scheduling/scheduler.hpp"

namespace lua_tasks {

// The run RunTask and RunPart share, inline in both (it is the hot path of
// every wake and start). t is current_ while it runs and its CPU time goes to
// `charged`: t itself, or for a part its task (a part's time counts with its
// task's). The clock is read after the run only when something needs it: a
// budget to close, or a yield whose wait starts now.
inline int Scheduler::RunCoroutine(Task* t, Task* charged, lua_State* from, int nargs, int64_t now, Ran* ran) {
  Task* saved = current_;
  current_ = t;
  t->status = TaskStatus::kRunning;
  t->wait = WaitKind::kNone;
  t->has_pending = false;
  int status;
  CpuBudget* budget = host_->budget();
  CpuBudget::Window outer;
  if (budget != nullptr) outer = budget->Open(charged->cpu_ns, true, now >= 0 ? now : clock_->MonoNs());
  {
    LuaHost::Entry entry(host_, t->co);
    status = lua_resume(t->co, from, nargs, &ran->nres);
  }
  ran->end = budget != nullptr || status == LUA_YIELD ? clock_->MonoNs() : 0;
  if (budget != nullptr) {
    charged->cpu_ns += budget->Close(outer, &ran->killed, ran->end);
    // A kill that goes on outside (the starter's deadline) reaches the next
    // instruction of the code that started or resumed this task.
    if (budget->killing() && host_->running() != nullptr) budget->Sync(host_->running());
  }
  current_ = saved;
  return status;
}

}  // namespace lua_tasks
