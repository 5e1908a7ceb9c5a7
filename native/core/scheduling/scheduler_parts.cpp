// SPDX-License-Identifier: MIT
// Detached parts: a coroutine that reaches an API wait under coroutine.resume runs on as a part of its task.
//
// Design (docs/design.md#detached-parts). The API waits record their wait in
// the running task and yield a sentinel (lua_api_tasks.cpp). When the
// sentinel comes back to a coroutine.resume called by the task's code
// (l_co_resume, lua_api_coroutine.cpp), the resume does not pass it up:
// Detach makes the coroutine a part, a Task of its own that is no task (no id
// finds it, JS never hears of it) but whose waits are filed and woken as any
// task's, and the resume returns true at once. So the seed's fan-out (one
// coroutine.create + resume per item, each waiting) runs its waits side by
// side. A part is its task's: tasks.current_id, the mailbox and the CPU
// budget are the task's; the task's end closes its parts; a part's error or
// kill ends the task. The family (a task and its parts) never runs nested in
// itself: a part woken while its task or another part runs waits in the
// ready queue (RunTask), so a part never ends the task under running code.
#include <utility>

#include "core/scheduling/scheduler_run.hpp"

namespace lua_tasks {

Task* Scheduler::OwnerOfPart(const Task* p) const {
  auto it = part_of_.find(p);
  return it == part_of_.end() ? const_cast<Task*>(p) : it->second.owner;
}

bool Scheduler::FamilyBusy(const Task* t) const {
  const Task* owner = (t->family & Task::kPart) != 0 ? OwnerOfPart(t) : t;
  return owner->status == TaskStatus::kRunning || (owner->family & Task::kPartRunning) != 0;
}

Scheduler::DetachResult Scheduler::Detach(lua_State* L) {
  Task* t = current_;  // the task's code that resumed the coroutine: the task, or a part of it
  Task* owner = Owner(t);
  if (owner->durable) {
    lua_pop(L, 1);
    return DetachResult::kDurable;
  }
  lua_State* co = lua_tothread(L, -1);
  Task* p = NewTask();
  p->co = co;
  p->family = Task::kPart;
  LuaHost::SetMark(co, LuaHost::kPartMark, true);                   // until ReleasePart
  p->anchor = anchors_.Put(L, host_->memory().arena().SlotOf(co));  // pops the thread
  p->Pend(t->pending_kind, t->pending_value, t->pending_unit);
  t->has_pending = false;
  std::vector<Task*>& list = parts_[owner];
  PartOf info{owner, list.size(), 0, 0};
  if (p->pending_kind == WaitKind::kPromise) {
    // The embedder settles the promise with the key and token it was given
    // when t awaited; Awaiting finds the part by them.
    p->await_token = t->await_token;
    info.from_key = t->key;
    info.token = t->await_token;
    redirect_[{t->key, t->await_token}] = p;
  }
  list.push_back(p);
  part_of_.emplace(p, info);
  owner->family |= Task::kHasParts;
  // What a part calls on the embedder's side runs in its task's context
  // (captured now if the task is in its first run, as Start does).
  if (owner->context == 0) owner->context = hooks_->CaptureContext(!owner->observed);
  p->context = owner->context;
  if (p->context != 0) hooks_->RetainContext(p->context);
  Park(p, clock_->MonoNs());
  return DetachResult::kDetached;
}

Task* Scheduler::Awaiting(uint64_t key, uint32_t token) {
  Task* t = tasks_.Find(key);
  if (t != nullptr && !t->ended() && t->SettledBy(token) != WaitKind::kNone) return t;
  if (redirect_.empty()) return nullptr;
  auto it = redirect_.find({key, token});
  if (it == redirect_.end()) return nullptr;
  Task* p = it->second;
  return p->SettledBy(token) != WaitKind::kNone ? p : nullptr;
}

bool Scheduler::RunPart(Task* p, lua_State* from, int nargs, int64_t now) {
  Task* owner = OwnerOfPart(p);
  owner->family |= Task::kPartRunning;
  Ran run;
  const int status = RunCoroutine(p, owner, from, nargs, now, &run);
  const int nres = run.nres;
  const int64_t end = run.end;
  owner->family &= ~Task::kPartRunning;
  LuaHost::HostSection section(host_, from);  // allocations below never raise
  if (run.killed) {
    EndFromPart(p, TaskEnd::kTimedOut, LUA_OK);
    return false;
  }
  if (status != LUA_OK && status != LUA_YIELD) {
    EndFromPart(p, TaskEnd::kFailed, status);
    return false;
  }
  bool parked = false;
  if (status == LUA_YIELD && p->has_pending) {  // another wait (or a preemption)
    lua_pop(p->co, nres);
    Park(p, end);
    parked = true;
  } else if (status == LUA_YIELD) {
    ParkPlain(p, nres);
  } else {
    lua_settop(p->co, 0);  // it returned: its values go nowhere (nobody resumed it)
    ReleasePart(p);
  }
  // Cancelled while the part ran (Cancel only marked it): the task ends now.
  if (owner->cancel_pending) {
    KillNow(owner);
    return false;
  }
  return parked;
}

void Scheduler::ParkPlain(Task* p, int nres) {
  // The values stay on its stack for its resumer's next coroutine.resume
  // (l_co_resume takes them there): only they, nothing below them.
  lua_State* co = p->co;
  const int extra = lua_gettop(co) - nres;
  if (extra > 0) {
    lua_rotate(co, 1, -extra);
    lua_pop(co, extra);
  }
  LuaHost::SetMark(co, LuaHost::kParkedMark, true);
  ReleasePart(p);
}

void Scheduler::ReleasePart(Task* p) {
  auto it = part_of_.find(p);
  const PartOf info = it->second;
  part_of_.erase(it);
  if (info.from_key != 0) redirect_.erase({info.from_key, info.token});
  auto list_it = parts_.find(info.owner);
  std::vector<Task*>& list = list_it->second;
  if (Task* last = list.back(); last != p) {
    list[info.index] = last;
    part_of_.find(last)->second.index = info.index;
  }
  list.pop_back();
  if (list.empty()) {
    parts_.erase(list_it);
    info.owner->family &= ~Task::kHasParts;
  }
  ClearWait(p);
  LuaHost::SetMark(p->co, LuaHost::kPartMark, false);  // a plain coroutine again (dead or suspended)
  p->family = 0;
  p->status = TaskStatus::kDone;  // queue entries naming it are stale
  Release(p);
}

void Scheduler::KillParts(Task* owner) {
  // Their <close> handlers may end others of them (or start tasks): take one
  // at a time from what is left.
  for (auto it = parts_.find(owner); it != parts_.end() && !it->second.empty(); it = parts_.find(owner)) {
    Task* p = it->second.back();
    ClearWait(p);
    p->status = TaskStatus::kRunning;
    lua_State* co = p->co;
    // One the CPU budget's kill was raised in keeps its stack (see EndTask).
    const bool killed = LuaHost::HasKilledMark(co) && lua_status(co) != LUA_OK;
    if (!killed) {
      {
        LuaHost::Entry entry(host_, co);
        lua_resetthread(co);  // runs its <close> variables; an error in one is dropped
      }
      lua_settop(co, 0);
    }
    ReleasePart(p);
  }
}

void Scheduler::EndFromPart(Task* p, TaskEnd kind, int status) {
  Task* owner = OwnerOfPart(p);
  lua_State* M = host_->main();
  lua_State* co = p->co;
  lua_Debug ar;
  TaskTrace trace;
  TraceOf(M, co, &ar, &trace);  // the traceback stays on M until EndTask pops it
  const bool failed = kind == TaskEnd::kFailed;
  if (failed) lua_xmove(co, M, 1);  // the error value, above the traceback
  const bool killed = (kind == TaskEnd::kTimedOut || LuaHost::HasKilledMark(co)) && lua_status(co) != LUA_OK;
  p->status = TaskStatus::kRunning;
  if (!killed) {
    {
      LuaHost::Entry entry(host_, co);
      lua_resetthread(co);
    }
    lua_settop(co, 0);
  }
  ReleasePart(p);
  // The task was waiting: it is closed as a cancel closes it (its <close>
  // variables run; a cancel from one only marks it), and ends as the part did.
  ClearWait(owner);
  owner->status = TaskStatus::kRunning;
  {
    LuaHost::Entry entry(host_, owner->co);
    lua_resetthread(owner->co);
  }
  lua_settop(owner->co, 0);
  if (failed) lua_xmove(M, owner->co, 1);
  EndTask(owner, {kind, failed ? status : LUA_OK, failed ? 1 : 0, &trace});
}

void Scheduler::WakeReceivingPart(Task* owner) {
  auto it = parts_.find(owner);
  if (it == parts_.end()) return;
  for (Task* p : it->second) {
    if (p->status == TaskStatus::kWaiting && p->wait == WaitKind::kReceive) {
      ClearWait(p);
      Continue(p, 0);
      if (batch_ == 0) hooks_->OnScheduleChange();
      return;
    }
  }
}

}  // namespace lua_tasks
