// SPDX-License-Identifier: MIT
// The tasks table: start, resume, send, receive, cancel, status, wait, sleep, current_id; and namazu.coroutine.
//
// Every C function here checks its arguments, then calls the scheduler,
// then pushes results: nothing with a destructor lives in their frames when
// they raise. The waits (sleep, wait, receive) pend on the task and yield:
// directly on the task's own thread, else a sentinel that the resume
// wrappers (lua_api_coroutine.cpp) pass up to it.
#include "core/api/lua_api_tasks.hpp"

#include "lua/tasks.lua.hpp"

#include <cmath>

#include "core/api/lua_api_durable.hpp"
#include "core/durable/durable_record.hpp"
#include "core/durable/replayer.hpp"
#include "core/scheduling/scheduler.hpp"
#include "core/scheduling/yield_instruction.hpp"

namespace lua_tasks {

namespace {

// The scheduler behind a tasks function (also its upvalue). Finalizers
// still run after it is gone (lua_close at runtime close): they get an
// error instead.
Scheduler* Sched(lua_State* L) {
  LuaHost::RaiseIfClosing(L);
  return static_cast<Scheduler*>(LuaHost::From(L)->scheduler);
}

// Yields the current task from L: directly on its own thread, else by the
// sentinel that the resume wrappers pass up.
int Suspend(lua_State* L, Scheduler* s, Task* t) {
  if (L == t->co) return lua_yield(L, 0);
  lua_pushlightuserdata(L, s);
  return lua_yield(L, 1);
}

// Raises unless a task is running and can be suspended from L.
Task* NeedTask(lua_State* L, Scheduler* s, const char* fname) {
  Task* t = s->current();
  if (t == nullptr) luaL_error(L, "%s: not inside a task (start one with rt.start or tasks.start)", fname);
  if (!lua_isyieldable(L)) {
    luaL_error(L, "%s: cannot suspend the task here (inside a metamethod, a C function or a call from JS)", fname);
  }
  return t;
}

}  // namespace

int AwaitRestore(lua_State* L, Scheduler* s, const char* fname, lua_KFunction k, lua_KContext ctx) {
  Replayer* r = s->replayer();
  if (r == nullptr || !r->async_reads() || lua_type(L, 1) != LUA_TSTRING) return -1;
  size_t n;
  const char* id = lua_tolstring(L, 1, &n);
  uint64_t key;
  if (s->ParseId(std::string_view(id, n), &key) || !r->Activating(std::string_view(id, n))) return -1;
  Task* t = s->current();
  if (t == nullptr || !lua_isyieldable(L)) {
    return luaL_error(L,
                      "%s: the durable task %s is being read from the store; call this from a task (not from a "
                      "metamethod, a C function or a call from JS), which waits for it",
                      fname, id);
  }
  r->activations().Find(std::string_view(id, n))->waiters.push_back(t->key);
  t->Pend(WaitKind::kRestore);
  if (L == t->co) return lua_yieldk(L, 0, ctx, k);
  lua_pushlightuserdata(L, s);  // the sentinel, passed up by the resume wrappers (see Suspend)
  return lua_yieldk(L, 1, ctx, k);
}

namespace {

int l_tasks_sleep(lua_State* L) {
  Scheduler* s = Sched(L);
  const lua_Number secs = luaL_checknumber(L, 1);
  luaL_argcheck(L, !std::isnan(secs) && secs >= 0 && secs * 1e9 <= static_cast<double>(kMaxWaitNs), 1,
                "seconds must be a finite number from 0 to 100 years");
  Task* t = NeedTask(L, s, "tasks.sleep");
  t->Pend(WaitKind::kFor, static_cast<int64_t>(std::ceil(secs * 1e9)));
  return Suspend(L, s, t);
}

void PushId(lua_State* L, Scheduler* s, uint64_t key) {
  char buf[Scheduler::kIdLength];
  lua_pushlstring(L, buf, s->FormatId(key, buf));
}

int l_tasks_current_id(lua_State* L) {
  Scheduler* s = Sched(L);
  Task* t = s->current();
  if (t == nullptr) {
    lua_pushnil(L);
    return 1;
  }
  PushId(L, s, s->Owner(t)->key);  // a detached part's is its task's
  return 1;
}

int StartTask(lua_State* L) {
  Scheduler* s = Sched(L);
  const int t = lua_type(L, 1);
  luaL_argexpected(L, t == LUA_TFUNCTION || t == LUA_TTHREAD || t == LUA_TSTRING, 1,
                   "function, coroutine or entry name");
  if (t == LUA_TSTRING) {  // a global name or "mod.fn" path, as a durable child's entry
    PushEntry(L, lua_tostring(L, 1), "tasks.start");
    lua_replace(L, 1);
  }
  const int nargs = lua_gettop(L) - 1;
  Scheduler::StartError error;
  const uint64_t key = s->Start(L, nargs, false, &error);
  if (key == 0 && error == Scheduler::StartError::kNoStackRoom) {
    return luaL_error(L, "tasks.start: not enough memory for the task's stack to take %d arguments", nargs);
  }
  if (key == 0 && error == Scheduler::StartError::kMainThread) {
    return luaL_argerror(L, 1, "the runtime's main thread cannot become a task (it runs the calls from JS)");
  }
  if (key == 0) return luaL_argerror(L, 1, "coroutine already started, running or a task");
  PushId(L, s, key);
  return 1;
}

// Key of the task id at arg 1, or 0 (unknown format). A dormant task is
// activated first (docs/durable.md#restore-at-open).
uint64_t KeyArg(lua_State* L, Scheduler* s) {
  size_t n;
  const char* id = luaL_checklstring(L, 1, &n);
  uint64_t key = 0;
  if (!s->Resolve(std::string_view(id, n), &key)) return 0;
  return key;
}

int l_tasks_resume(lua_State* L) {
  Scheduler* s = Sched(L);
  const uint64_t key = KeyArg(L, s);
  const int nargs = lua_gettop(L) - 1;
  switch (s->Resume(key, L, nargs)) {
    case Scheduler::ResumeResult::kResumed:
      lua_pushboolean(L, 1);
      return 1;
    case Scheduler::ResumeResult::kSelf:
      return luaL_error(L, "tasks.resume: a task cannot resume itself (it is running)");
    case Scheduler::ResumeResult::kNotFound:
      lua_pushnil(L);
      lua_pushliteral(L, "no such task (unknown or finished)");
      return 2;
    case Scheduler::ResumeResult::kNotResumable:
      lua_pushnil(L);
      lua_pushliteral(L, "task is not waiting on a yield instruction");
      return 2;
    case Scheduler::ResumeResult::kNoStackRoom:
      return luaL_error(
          L, "tasks.resume: the task's stack has no room for %d more values (a coroutine holds about 1,000,000)",
          nargs);
  }
  return 0;
}

// send(id, ...) -> true | nil, message. A message is one or more values,
// the first not nil: receive's nil then always means its timeout.
int l_tasks_send(lua_State* L) {
  Scheduler* s = Sched(L);
  const uint64_t key = KeyArg(L, s);
  const int nargs = lua_gettop(L) - 1;
  luaL_argcheck(L, !lua_isnoneornil(L, 2), 2,
                "a message's first value must not be nil (tasks.receive answers nil, \"timeout\" for a timeout)");
  luaL_checkstack(L, 3, "tasks.send");
  switch (s->Send(key, L, nargs)) {
    case Scheduler::SendResult::kQueued:
      lua_pushboolean(L, 1);
      return 1;
    case Scheduler::SendResult::kNotFound:
      lua_pushnil(L);
      lua_pushliteral(L, "no such task (unknown or finished)");
      return 2;
    case Scheduler::SendResult::kFull:
      break;
    case Scheduler::SendResult::kNotPersistable:
      return luaL_error(L, "tasks.send: a message to a durable task must persist: %s", s->last_send_error().c_str());
  }
  return luaL_error(L, "tasks.send: the task's mailbox is full (%d messages, the runtime's mailboxLimit option)",
                    static_cast<int>(s->mailbox_limit()));
}

// The task's next message as its values, or nil, "timeout" if there is none
// (the timeout passed, or receive(0) found the mailbox empty).
int Received(lua_State* L, Scheduler* s, Task* t) {
  const int n = s->TakeMessage(t, L);
  if (n == -2) return luaL_error(L, "tasks.receive: the message's values do not fit on the task's stack");
  if (n == -3)
    return luaL_error(L,
                      "tasks.receive: the message cannot be journaled for this durable task (values that persist only: "
                      "docs/durable.md)");
  if (n >= 0) return n;
  lua_pushnil(L);
  lua_pushliteral(L, "timeout");
  return 2;
}

// After a receive's wait: woken by a message (it is in the mailbox) or by
// its timer (then the mailbox is empty, or a message came with the timer).
int k_receive(lua_State* L, int status, lua_KContext ctx) {
  Scheduler* s = Sched(L);
  lua_settop(L, 0);  // a timer's wake values
  Task* t = s->current();
  if (t == nullptr) return luaL_error(L, "tasks.receive: not inside a task");
  return Received(L, s, t);
}

// receive([timeout [, unit]]) -> values... | nil, "timeout"   (may suspend)
int l_tasks_receive(lua_State* L) {
  Scheduler* s = Sched(L);
  int64_t timeout = -1;  // none
  Unit unit = Unit::kSeconds;
  if (!lua_isnoneornil(L, 1)) {
    const lua_Number v = luaL_checknumber(L, 1);
    if (!lua_isnoneornil(L, 2)) {
      size_t n;
      const char* name = luaL_checklstring(L, 2, &n);
      luaL_argcheck(L, ParseUnit(std::string_view(name, n), &unit), 2,
                    "unknown time unit (expected NANOSECONDS, MICROSECONDS, MILLISECONDS, SECONDS, MINUTES, HOURS or "
                    "DAYS)");
    }
    const double ns = v * static_cast<double>(UnitNs(unit));
    luaL_argcheck(L, !std::isnan(v) && v >= 0 && ns <= static_cast<double>(kMaxWaitNs), 1,
                  "timeout must be a finite number from 0 to 100 years");
    timeout = static_cast<int64_t>(std::ceil(ns));
  }
  Task* t = s->current();
  if (t == nullptr) return luaL_error(L, "tasks.receive: not inside a task (start one with rt.start or tasks.start)");
  lua_settop(L, 0);
  // A durable task's replay takes what its journal says: the message it took
  // at once, or the wait it made (docs/durable.md), whatever the mailbox holds.
  const bool replayed_message = t->durable && s->replayer()->ReplaysMessage(t);
  const bool replayed_wait = t->durable && s->replayer()->ReplaysWait(t, WaitKind::kReceive);
  const bool mail = s->Owner(t)->mail_count > 0;  // a part receives its task's messages
  if (replayed_message || (!replayed_wait && (mail || timeout == 0))) return Received(L, s, t);
  NeedTask(L, s, "tasks.receive");  // it must suspend: raises if it cannot here
  t->Pend(WaitKind::kReceive, timeout, unit);
  if (L == t->co) return lua_yieldk(L, 0, 0, k_receive);
  lua_pushlightuserdata(L, s);  // the sentinel, passed up by the resume wrappers (see Suspend)
  return lua_yieldk(L, 1, 0, k_receive);
}

int l_tasks_cancel(lua_State* L) {
  Scheduler* s = Sched(L);
  const uint64_t key = KeyArg(L, s);
  if (s->Cancel(key)) {
    lua_pushboolean(L, 1);
    return 1;
  }
  lua_pushnil(L);
  lua_pushliteral(L, "no such task (unknown or finished)");
  return 2;
}

int l_tasks_status(lua_State* L) {
  Scheduler* s = Sched(L);
  size_t n;
  const char* id = luaL_checklstring(L, 1, &n);
  uint64_t key = 0;
  s->ParseId(std::string_view(id, n), &key);  // looks only: a dormant task stays dormant
  if (const Replayer* r = s->replayer();
      key == 0 && r != nullptr &&
      (r->dormant().Contains(std::string_view(id, n)) || r->activations().Find(std::string_view(id, n)) != nullptr)) {
    lua_pushstring(L, TaskStatusName(TaskStatus::kWaiting));
  } else if (Task* t = s->Find(key)) {
    lua_pushstring(L, TaskStatusName(t->status));
  } else if (const Scheduler::Finished* f = s->FindFinished(key)) {
    lua_pushstring(L, TaskStatusName(f->status));
  } else {
    lua_pushnil(L);
  }
  return 1;
}

// A durable task's join that answered at once (its task had ended, or is
// unknown) is a value record of this identity: a replay tells it from the
// wait of a later join, and hands back what it answered then.
constexpr std::string_view kJoinIdentity = "tasks.wait";

bool ReplaysJoinValue(Journal* j) {
  if (j == nullptr || !j->replaying() || j->next_kind() != RecordKind::kValue) return false;
  std::optional<std::string_view> identity;
  SplitIdentity(j->Peek(), &identity);
  return identity && *identity == kJoinIdentity;
}

int l_tasks_join(lua_State* L);
int k_join_again(lua_State* L, int, lua_KContext) {
  return l_tasks_join(L);
}

// join(id) -> true, results... | false, err | nil, message  (may suspend)
int l_tasks_join(lua_State* L) {
  Scheduler* s = Sched(L);
  luaL_checkstring(L, 1);
  Journal* j = RunningJournal(s);
  if (ReplaysJoinValue(j)) {
    lua_settop(L, 0);
    const int n = ReplayValues(s, j, RecordKind::kValue, kJoinIdentity, L);
    return n < 0 ? lua_error(L) : n;
  }
  lua_settop(L, 1);
  if (AwaitRestore(L, s, "tasks.wait", k_join_again) >= 0) return 0;  // (it yields)
  const uint64_t key = KeyArg(L, s);
  if (Task* t = s->current(); t != nullptr && t->durable && s->replayer()->ReplaysWait(t, WaitKind::kJoin)) {
    // A durable task's replay: the task it waited for may be of the earlier
    // run; the journal holds the outcome (docs/durable.md).
    t->Pend(WaitKind::kJoin, static_cast<int64_t>(key));
    return Suspend(L, s, t);
  }
  Task* target = s->Find(key);
  if (target != nullptr) {
    Task* t = NeedTask(L, s, "tasks.wait");
    if (target == s->Owner(t)) return luaL_error(L, "tasks.wait: a task cannot wait for itself");
    t->Pend(WaitKind::kJoin, static_cast<int64_t>(key));
    return Suspend(L, s, t);
  }
  // Ended (recently, or a durable task whose end record is retained), or
  // unknown: answered at once, and journaled as such by a live durable task
  // (a journal of a version that did not record it replays it live, as it
  // ran then).
  const bool record = j != nullptr && !j->replaying();
  if (record && s->replayer()->replay_only()) {
    PushReplayStop(s, j, L, "tasks.wait");
    return lua_error(L);
  }
  lua_settop(L, 0);
  const int n = s->PushJoinOutcome(key, L);
  if (record && !JournalValues(s, j, RecordKind::kValue, L, n, kJoinIdentity)) return lua_error(L);
  return n;
}

// tasks.start: a durable task's child is durable (StartChild: a replay
// returns its id and starts nothing); the test is here, not a wrapper,
// since every start from Lua passes it (bench W8).
int l_tasks_start(lua_State* L) {
  Scheduler* s = Sched(L);
  const Task* t = s->current();
  if (t != nullptr && t->durable) return StartChild(L, s, "tasks.start");
  return StartTask(L);
}

// The tasks table's C functions; tasks.wait is lua/tasks.lua's, over l_tasks_join.
const luaL_Reg kTasksFuncs[] = {
    {"sleep", l_tasks_sleep},   {"current_id", l_tasks_current_id}, {"start", l_tasks_start},
    {"resume", l_tasks_resume}, {"cancel", l_tasks_cancel},         {"status", l_tasks_status},
    {"send", l_tasks_send},     {"receive", l_tasks_receive},       {nullptr, nullptr},
};

}  // namespace

void RegisterTasksApi(lua_State* L, Scheduler* scheduler) {
  // The tasks module.
  lua_newtable(L);
  lua_pushlightuserdata(L, scheduler);
  luaL_setfuncs(L, kTasksFuncs, 1);
  // The instruction and unit names are the parser's own (yield_instruction.cpp).
  lua_createtable(L, 0, kKindCount);
  for (int i = 0; i < kKindCount; ++i) {
    lua_pushstring(L, KindName(i));
    lua_setfield(L, -2, KindName(i));
  }
  lua_setfield(L, -2, "instruction");
  lua_createtable(L, 0, 2);
  for (const char* k : {"SCHEDULER", "COMMIT"}) {
    lua_pushstring(L, k);
    lua_setfield(L, -2, k);
  }
  lua_setfield(L, -2, "reason");
  lua_createtable(L, 0, kUnitCount);
  for (int i = 0; i < kUnitCount; ++i) {
    const char* name = UnitName(static_cast<Unit>(i));
    lua_pushstring(L, name);
    lua_setfield(L, -2, name);
  }
  lua_setfield(L, -2, "unit");
  lua_newtable(L);
  lua_setfield(L, -2, "state");  // in memory until a store is configured (docs/design.md#persistence)
  const int tasks = lua_gettop(L);

  if (luaL_loadbufferx(L, kTasksLua, sizeof(kTasksLua) - 1, kTasksLuaName, "t") != LUA_OK) lua_error(L);
  lua_pushvalue(L, tasks);
  lua_pushlightuserdata(L, scheduler);
  lua_pushcclosure(L, l_tasks_join, 1);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_call(L, 3, 0);

  lua_setglobal(L, "tasks");
}

}  // namespace lua_tasks
