// SPDX-License-Identifier: MIT
// How a task ends: cancel and kill, the end told to the embedder and the joiners, the recent results.
#include <optional>
#include <utility>

#include "core/durable/replayer.hpp"
#include "core/scheduling/scheduler.hpp"
#include "core/scheduling/scheduler_shared_slice.hpp"

namespace lua_tasks {

// Pushes co's traceback onto M and fills `trace` with it and co's innermost
// frame that has a source line (a C function, such as coroutine.yield or a JS
// function, has none: its Lua caller's line is where the task was). `ar`
// holds the source name: it must outlive `trace`. Raises only for memory, in
// host code (a HostSection lifts the limit).
void Scheduler::TraceOf(lua_State* M, lua_State* co, lua_Debug* ar, TaskTrace* trace) {
  luaL_traceback(M, co, nullptr, 0);
  trace->traceback = lua_tostring(M, -1);
  for (int level = 0; lua_getstack(co, level, ar) != 0; ++level) {
    if (lua_getinfo(co, "Sl", ar) != 0 && ar->currentline > 0) {
      trace->source = ar->short_src;
      trace->line = ar->currentline;
      return;
    }
  }
}

bool Scheduler::Cancel(uint64_t key) {
  Task* t = Find(key);
  if (t == nullptr) return false;
  if (t->status == TaskStatus::kRunning || (t->family & Task::kPartRunning) != 0) {
    // It, or a part of it, is on the C stack: killed at its next yield (or
    // the part's), or ends cancelled.
    t->cancel_pending = true;
    return true;
  }
  // A committer whose write is in flight ends now: the write's settlement
  // finds no task and is ignored.
  KillNow(t);
  hooks_->OnScheduleChange();
  return true;
}

void Scheduler::CancelAll() {
  if (replayer_ != nullptr)
    replayer_->set_closing();  // the durable tasks' ends are not journaled: they go on at the next open
  std::vector<uint64_t> keys;
  keys.reserve(tasks_.size());
  tasks_.ForEach([&](const Task& t) { keys.push_back(t.key); });
  std::sort(keys.begin(), keys.end());
  // One CPU window for every <close> handler this runs: each
  // cancel would open one of its own, and 20 waiting tasks with a looping
  // handler held close() for 20 taskTimeouts. Once the deadline passes, the
  // handlers left are killed at their first instruction. (Inside a window
  // already, a close() asked for while Lua runs, that one holds.)
  CpuBudget* budget = host_->budget();
  CpuBudget::Window outer;
  const bool own_window = budget != nullptr && !budget->active();
  if (own_window) outer = budget->Open(0, false);
  for (uint64_t k : keys) {
    Task* t = Find(k);
    if (t != nullptr && t->status != TaskStatus::kRunning && (t->family & Task::kPartRunning) == 0) KillNow(t);
  }
  if (own_window) {
    bool killed;
    budget->Close(outer, &killed);
    if (killed) budget->Install(host_->main());  // the kill may have left the main thread a hook per instruction
  }
  for (size_t i = 0; i < ready_.size(); ++i) --ready_[i].task->queued;
  ready_.clear();
}

void Scheduler::KillNow(Task* t, TaskEnd kind) {
  // Host code on the stack to the end: a task-end listener that closes the
  // runtime waits for it (RuntimeCore::Close).
  LuaHost::HostSection section(host_, host_->current());
  ClearWait(t);
  // A task killed for its CPU budget that caught the kill and yielded: where
  // it was is read now, before closing the coroutine empties its stack.
  lua_Debug ar;
  TaskTrace trace;
  const bool traced = kind == TaskEnd::kTimedOut;
  if (traced) TraceOf(host_->main(), t->co, &ar, &trace);
  // Closing runs the coroutine's pending <close> variables (Lua code) on it:
  // meanwhile the task counts as running, so a cancel from there (the task's
  // own handler, or JS it calls) only marks it instead of closing the
  // coroutine again under the handler.
  t->status = TaskStatus::kRunning;
  {
    LuaHost::Entry entry(host_, t->co);
    lua_resetthread(t->co);
  }
  lua_settop(t->co, 0);
  EndTask(t, {kind, LUA_OK, 0, traced ? &trace : nullptr});  // pops the traceback
}

void Scheduler::EndTask(Task* t, TaskEnding end) {
  t->status = end.kind == TaskEnd::kDone        ? TaskStatus::kDone
              : end.kind == TaskEnd::kCancelled ? TaskStatus::kCancelled
                                                : TaskStatus::kFailed;
  const bool failed_in_lua = end.kind == TaskEnd::kFailed;
  const bool no_values = end.kind == TaskEnd::kCancelled || end.kind == TaskEnd::kTimedOut;
  const int nres = end.nres;
  ClearWait(t);
  if ((t->family & Task::kHasParts) != 0) KillParts(t);
  // A coroutine that failed, or died of the budget's kill where it ran,
  // keeps its stack: where it was is read from it.
  lua_Debug ar;
  TaskTrace own;
  if (end.trace == nullptr && (failed_in_lua || end.kind == TaskEnd::kTimedOut)) {
    TraceOf(host_->main(), t->co, &ar, &own);
    end.trace = &own;
  }
  if (t->durable) replayer_->OnEnd(t, end);
  const bool tell = t->observed || failed_in_lua || end.kind == TaskEnd::kTimedOut;
  // Remembered first: from here on Find no longer answers for this task, so
  // code run by the hook or by a woken joiner sees it through FindFinished.
  Remember(t, end);
  if (tell) hooks_->OnTaskEnd(*t, t->co, end);
  if (end.trace != nullptr) lua_pop(host_->main(), 1);  // its traceback, before any joiner runs

  // Wake the tasks joined on this one: (true, results...) or (false, error).
  const uint64_t key = t->key;
  // Each task keeps its joiners: scanning every live task here made N task
  // ends cost O(N^2) (47% of W2's time, 2.1 s to close 20,000 tasks).
  std::vector<uint64_t> joiners = std::move(t->joiners);
  lua_State* co = t->co;
  std::optional<SharedSlice> slice;
  if (!joiners.empty()) slice.emplace(this);
  for (uint64_t k : joiners) {
    Task* w = FindLive(k);                                                           // a part may be waiting too
    if (w == nullptr || w->wait != WaitKind::kJoin || w->join_key != key) continue;  // stale
    ClearWait(w);
    // A suspended task has room for a few values; more need its stack grown
    // (see Start). The copies cross one at a time, so co needs one slot.
    if (no_values || !lua_checkstack(w->co, 1 + nres) || !lua_checkstack(co, 1)) {
      lua_pushboolean(w->co, 0);
      if (no_values) {
        lua_pushstring(w->co, end.kind == TaskEnd::kCancelled ? "task cancelled" : "task killed: CPU budget exceeded");
      } else {
        lua_pushfstring(
            w->co,
            "the task's %d results do not fit on the waiting task's stack (a coroutine holds about 1,000,000 values)",
            nres);
      }
      RunJoiner(w, 2);
      continue;
    }
    lua_pushboolean(w->co, end.kind == TaskEnd::kDone);
    const int top = lua_gettop(co);
    for (int i = top - nres + 1; i <= top; ++i) {
      lua_pushvalue(co, i);
      lua_xmove(co, w->co, 1);
    }
    RunJoiner(w, 1 + nres);
  }
  // A coroutine that died of the CPU budget's kill is left as it is, its
  // <close> variables not run: the kill came from a hook, and Lua runs no
  // hooks in it after that, so nothing could bound them (one that loops hung
  // the process); and lua_settop would run them unprotected (one that raised
  // aborted it). Unanchored, the collector frees it.
  const bool killed =
      (end.kind == TaskEnd::kTimedOut || (failed_in_lua && LuaHost::HasKilledMark(co))) && lua_status(co) != LUA_OK;
  if (failed_in_lua && !killed) {
    // A failed coroutine keeps its stack; closing it runs its pending
    // <close> variables, as coroutine.close would.
    LuaHost::Entry entry(host_, co);
    lua_resetthread(co);
  }
  if (!killed) lua_settop(co, 0);
  Release(t);
}

void Scheduler::RunJoiner(Task* w, int nargs) {
  // A task cancelled while the lock is held (from JS, or from Lua that
  // rt.call runs) wakes its joiners after the unlock, as a resume would.
  if (locks_ > 0) {
    Defer(w, nargs);
    return;
  }
  // The task ended of a kill that goes on outside it (the deadline of the
  // code that started or resumed it): run now, the joiner would die of that
  // kill at its first instruction, and could never learn of the end it was
  // waiting for (util.async's warden, for one). It was waiting, not started
  // by the code being killed: it runs from the ready queue, under a budget
  // of its own, as any task woken from the loop.
  if (const CpuBudget* budget = host_->budget(); budget != nullptr && budget->killing()) {
    Continue(w, nargs);
    hooks_->OnScheduleChange();
    return;
  }
  RunTask(w, host_->current(), nargs);
}

void Scheduler::Remember(Task* t, const TaskEnding& end) {
  // Stack of t->co: results (nres) or the error value on top. Most tasks end
  // with no result or one: those keep no table (one per task was a fifth of
  // the cost of spawning one).
  lua_State* co = t->co;
  Finished f{t->key, t->status, 0, LuaRef()};
  if (!lua_checkstack(co, 2)) {  // only without memory: the results are not kept
    finished_.Add(std::move(f));
    return;
  }
  const int nres = end.nres;
  // The one value, result or error, is on top: a number or a boolean is kept
  // in the entry itself.
  if ((end.kind == TaskEnd::kDone && nres == 1) || end.kind == TaskEnd::kFailed) {
    const int type = lua_type(co, -1);
    if (type == LUA_TNUMBER || type == LUA_TBOOLEAN) {
      f.nres = 1;
      f.scalar = type;
      if (type == LUA_TBOOLEAN) {
        f.i = lua_toboolean(co, -1);
      } else if (lua_isinteger(co, -1)) {
        f.integer = true;
        f.i = lua_tointeger(co, -1);
      } else {
        f.n = lua_tonumber(co, -1);
      }
      finished_.Add(std::move(f));
      return;
    }
  }
  if (end.kind == TaskEnd::kDone) {
    f.nres = nres;
    if (nres == 1) {
      lua_pushvalue(co, -1);
    } else if (nres > 1) {
      lua_createtable(co, nres, 0);
      for (int i = 1; i <= nres; ++i) {
        lua_pushvalue(co, -1 - nres - 1 + i);
        lua_rawseti(co, -2, i);
      }
    }
  } else if (end.kind == TaskEnd::kFailed) {
    f.nres = 1;
    lua_pushvalue(co, -1);  // the error value
  }
  if (f.nres > 0) {
    lua_xmove(co, host_->main(), 1);
    f.values = LuaRef::Pop(host_->main());
  }
  finished_.Add(std::move(f));
}

int Scheduler::PushFinished(const Finished& f, lua_State* L) const {
  if (f.status == TaskStatus::kCancelled || (f.status == TaskStatus::kFailed && f.nres == 0)) {
    lua_pushstring(L, f.status == TaskStatus::kCancelled ? "task cancelled" : "task killed: CPU budget exceeded");
    return 1;
  }
  if (f.nres <= 1) {
    if (f.nres == 0) return 0;
    if (f.scalar == LUA_TBOOLEAN) {
      lua_pushboolean(L, static_cast<int>(f.i));
    } else if (f.scalar == LUA_TNUMBER && f.integer) {
      lua_pushinteger(L, f.i);
    } else if (f.scalar == LUA_TNUMBER) {
      lua_pushnumber(L, f.n);
    } else {
      f.values.Push(L);
    }
    return 1;
  }
  f.values.Push(L);
  for (int i = 1; i <= f.nres; ++i) lua_rawgeti(L, -i, i);
  lua_remove(L, -1 - f.nres);
  return f.nres;
}

const Scheduler::Finished* Scheduler::FindFinished(uint64_t key) const {
  return finished_.Find(key);
}

// A join answers at once for a task that is not live: from this run's
// recent outcomes (the latest kFinishedKept), else from a durable task's
// end record (Replayer::PushEnd: kept longer, and across restarts), else
// "no such task": a join never waits for a task that cannot end.
int Scheduler::PushJoinOutcome(uint64_t key, lua_State* L) {
  LuaHost::HostSection section(host_, L);
  if (const Finished* f = FindFinished(key)) {
    // Its stack takes the values one by one (PushFinished's table, then each).
    if (!lua_checkstack(L, f->nres + 3)) {
      if (!lua_checkstack(L, 2)) return 0;
      lua_pushnil(L);
      lua_pushliteral(L, "the task's results do not fit on the waiting task's stack");
      return 2;
    }
    lua_pushboolean(L, f->status == TaskStatus::kDone);
    return 1 + PushFinished(*f, L);
  }
  if (replayer_ != nullptr) {
    if (const int n = replayer_->PushEnd(key, L); n >= 0) return n;
  }
  if (!lua_checkstack(L, 2)) return 0;
  lua_pushnil(L);
  lua_pushliteral(L, "no such task (unknown, or finished too long ago)");
  return 2;
}

}  // namespace lua_tasks
