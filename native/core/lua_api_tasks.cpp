// SPDX-License-Identifier: MIT
// The Lua face of the scheduler: coroutine.yield instructions, tasks, namazu.coroutine, require.
//
// Design: a task's instruction is parsed where it is given. coroutine.yield
// is replaced by l_co_yield: on a task's own thread it validates the
// instruction (raising at the caller's line if it is bad), stores it in the
// task and yields no values; on any other coroutine it is Lua's plain yield.
// API waits (tasks.sleep, tasks.wait) may be called from inside coroutines the
// user made: they store the instruction and yield a sentinel, and the
// wrapped coroutine.resume / coroutine.wrap pass a sentinel yield up to their
// own resumer and the resume values back down, until it reaches the task's
// thread and the scheduler. Every C function here checks its arguments, then
// calls the scheduler, then pushes results: nothing with a destructor lives in
// their frames when they raise.
#include "lua_api_tasks.hpp"

#include <cmath>
#include <cstdio>
#include <string>

#include "coded_error.hpp"
#include "cron_expr.hpp"
#include "scheduler.hpp"

namespace lua_tasks {

namespace {

constexpr const char* kPreloadKey = kPreloadRegistryKey;

// The scheduler behind a tasks function. Finalizers still run after it is
// gone (lua_close at runtime close): they get an error instead.
Scheduler* Sched(lua_State* L) {
  LuaHost::RaiseIfClosing(L);
  return static_cast<Scheduler*>(lua_touserdata(L, lua_upvalueindex(1)));
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

// The wall-clock deadline of an UNTIL_NEXT yield: the next instant of the
// cron expression strictly after now. Returns false with err filled for a bad
// expression or zone, or one with no next time. All C++ state lives and dies
// in here, so the caller can raise afterwards.
bool CronDeadline(Scheduler* s, lua_State* L, const WaitRequest& req, int64_t* wall_ns, char* err,
                  size_t errlen) noexcept {
  try {
    std::string error;
    CronExpr expr;
    size_t n;
    const char* text = lua_tolstring(L, req.cron_index, &n);
    if (!ParseCron(std::string_view(text, n), &expr, &error)) {
      std::snprintf(err, errlen, "UNTIL_NEXT: %s", error.c_str());
      return false;
    }
    const date::time_zone* zone = s->default_zone();
    if (req.zone_index != 0) {
      const char* name = lua_tolstring(L, req.zone_index, &n);
      zone = FindZone(std::string_view(name, n), &error);
      if (zone == nullptr) {
        std::snprintf(err, errlen, "UNTIL_NEXT: %s", error.c_str());
        return false;
      }
    }
    const int64_t now_s = s->clock()->WallNs() / 1000000000;
    const std::optional<int64_t> next = CronNext(expr, now_s, zone);
    if (!next) {
      std::snprintf(err, errlen, "UNTIL_NEXT: cron expression \"%.80s\" has no next time", text);
      return false;
    }
    *wall_ns = *next * 1000000000;
    return true;
  } catch (const std::exception& e) {
    std::snprintf(err, errlen, "UNTIL_NEXT: %s", e.what());
    return false;
  }
}

// After a COMMIT: resumed with (true, nil) once written, or (false, err).
int k_commit(lua_State* L, int status, lua_KContext ctx) {
  const int top = lua_gettop(L);
  if (!lua_toboolean(L, top - 1)) return lua_error(L);  // err is on top
  lua_settop(L, top - 2);
  return lua_gettop(L);  // "COMMIT", extras...
}

// The instruction a yield's arguments name ("" for none: IMMEDIATE), or null
// if they name none: then it is a plain Lua yield.
const char* InstructionOf(lua_State* L) {
  if (lua_isnoneornil(L, 1)) return "";
  if (lua_type(L, 1) != LUA_TSTRING) return nullptr;
  const char* given = lua_tostring(L, 1);
  for (int i = 0; i < kKindCount; ++i) {
    const char* name = KindName(i);
    size_t k = 0;
    while (name[k] != '\0' && given[k] != '\0' &&
           (given[k] == name[k] || (given[k] >= 'a' && given[k] <= 'z' && given[k] - 'a' + 'A' == name[k])))
      ++k;
    if (name[k] == '\0' && given[k] == '\0') return name;
  }
  return nullptr;
}

int l_co_yield(lua_State* L) {
  Scheduler* s = Sched(L);
  Task* t = s->current();
  // Lua would say "attempt to yield from outside a coroutine": say what the
  // instruction needs instead, as tasks.sleep does (NeedTask).
  if (!lua_isyieldable(L)) {
    if (const char* name = InstructionOf(L)) {
      const char* call = *name == '\0' ? "coroutine.yield()" : lua_pushfstring(L, "coroutine.yield(\"%s\")", name);
      if (t == nullptr) {
        return luaL_error(L,
                          "%s: not inside a task (yield instructions need one: start it with rt.start(fn) or "
                          "tasks.start(fn))",
                          call);
      }
      return luaL_error(L, "%s: cannot suspend the task here (inside a metamethod, a C function or a call from JS)",
                        call);
    }
  }
  if (t == nullptr || t->co != L) return lua_yield(L, lua_gettop(L));  // plain Lua semantics
  const int n = lua_gettop(L);
  if (n == 0) {  // the common bare yield: IMMEDIATE, nothing to parse
    t->Pend(WaitKind::kImmediate);
    return lua_yield(L, 0);
  }
  if (lua_touserdata(L, 1) == s && t->has_pending) return lua_yield(L, 0);  // an API wait passed up
  WaitRequest req;
  char err[256];
  // Coded errors: a task that does not catch them fails with ERR_BAD_YIELD
  // or ERR_COMMIT_FAILED (README "Errors"); pcall sees the same text as ever.
  if (!ParseYieldInstruction(L, 1, n, *s->clock(), s->yield_names(), &req, err, sizeof err)) {
    return RaiseCodedError(L, ErrorCode::kBadYield, err);
  }
  if (req.kind == WaitKind::kUntilNext && !CronDeadline(s, L, req, &req.wall_ns, err, sizeof err)) {
    return RaiseCodedError(L, ErrorCode::kBadYield, err);
  }
  if (req.kind == WaitKind::kCommit) {
    if (!s->has_store()) {
      return RaiseCodedError(L, ErrorCode::kCommitFailed,
                             "COMMIT failed: this runtime has no store, so its state cannot be saved "
                             "(create it with Runtime.open({ name, store }))");
    }
    // The yield returns "COMMIT" and the extra values, which stay on this
    // frame's stack across the write (see k_commit).
    lua_pushliteral(L, "COMMIT");
    lua_replace(L, 1);
    t->Pend(req);
    return lua_yieldk(L, 0, 0, k_commit);
  }
  t->Pend(req);
  return lua_yield(L, 0);
}

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
  PushId(L, s, t->key);
  return 1;
}

int l_tasks_start(lua_State* L) {
  Scheduler* s = Sched(L);
  const int t = lua_type(L, 1);
  luaL_argexpected(L, t == LUA_TFUNCTION || t == LUA_TTHREAD, 1, "function or coroutine");
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

// Key of the task id at arg 1, or 0 (unknown format).
uint64_t KeyArg(lua_State* L, Scheduler* s) {
  size_t n;
  const char* id = luaL_checklstring(L, 1, &n);
  uint64_t key = 0;
  if (!s->ParseId(std::string_view(id, n), &key)) return 0;
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
  }
  return luaL_error(L, "tasks.send: the task's mailbox is full (%d messages, the runtime's mailboxLimit option)",
                    static_cast<int>(s->mailbox_limit()));
}

// The task's next message as its values, or nil, "timeout" if there is none
// (the timeout passed, or receive(0) found the mailbox empty).
int Received(lua_State* L, Scheduler* s, Task* t) {
  const int n = s->TakeMessage(t, L);
  if (n == -2) return luaL_error(L, "tasks.receive: the message's values do not fit on the task's stack");
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
  if (t->mail_count > 0 || timeout == 0) return Received(L, s, t);
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
  const uint64_t key = KeyArg(L, s);
  if (Task* t = s->Find(key)) {
    lua_pushstring(L, TaskStatusName(t->status));
  } else if (const Scheduler::Finished* f = s->FindFinished(key)) {
    lua_pushstring(L, TaskStatusName(f->status));
  } else {
    lua_pushnil(L);
  }
  return 1;
}

// join(id) -> true, results... | false, err | nil, message  (may suspend)
int l_tasks_join(lua_State* L) {
  Scheduler* s = Sched(L);
  const uint64_t key = KeyArg(L, s);
  Task* target = s->Find(key);
  if (target != nullptr) {
    Task* t = NeedTask(L, s, "tasks.wait");
    if (target == t) return luaL_error(L, "tasks.wait: a task cannot wait for itself");
    t->Pend(WaitKind::kJoin, static_cast<int64_t>(key));
    return Suspend(L, s, t);
  }
  if (const Scheduler::Finished* f = s->FindFinished(key)) {
    lua_settop(L, 0);
    lua_pushboolean(L, f->status == TaskStatus::kDone);
    luaL_checkstack(L, f->nres + 2, "too many results");
    return 1 + s->PushFinished(*f, L);
  }
  lua_pushnil(L);
  lua_pushliteral(L, "no such task (unknown, or finished too long ago)");
  return 2;
}

// is_task(v) / is_killed(v): whether v is a coroutine with that mark (the
// coroutine of a live task; one the CPU budget's kill was raised in).
template <bool (*HasMark)(lua_State*)>
int l_co_has_mark(lua_State* L) {
  lua_pushboolean(L, lua_type(L, 1) == LUA_TTHREAD && HasMark(lua_tothread(L, 1)));
  return 1;
}

// coroutine.resume's core (the prelude wraps it to pass API waits up):
// Lua's resume, plus what must hold for every coroutine run from Lua.
//  - A task's coroutine (coroutine.running() inside a task hands it out)
//    runs only under the scheduler: resumed behind its back, the task's stack
//    would change under a wait, a deferred start or a cancel. The main
//    thread is never a coroutine of Lua code's (issue 18): resumed, Lua
//    would call what its stack holds (the traceback handler in slot 1) and
//    empty it, and every later error from JS would read "error in error
//    handling". Both are refused as a failed resume.
//  - The CPU budget sees the switch (CpuBudget::EnterCoroutine, Sync on the
//    way back), and LuaHost::running() follows it.
int l_co_resume(lua_State* L) {
  lua_State* co = lua_tothread(L, 1);
  luaL_argexpected(L, co != nullptr, 1, "thread");
  LuaHost* host = LuaHost::From(L);
  const char* refused = nullptr;
  if (LuaHost::HasTaskMark(co)) {
    refused = "cannot resume a task's coroutine (resume the task: tasks.resume(id))";
  } else if (co == host->main()) {
    refused = "cannot resume the runtime's main thread (it runs the calls from JS; it is no coroutine)";
  }
  const int narg = lua_gettop(L) - 1;
  if (refused == nullptr && !lua_checkstack(co, narg)) refused = "too many arguments to resume";
  if (refused != nullptr) {
    lua_pushboolean(L, 0);
    lua_pushstring(L, refused);
    return 2;
  }
  lua_xmove(L, co, narg);
  CpuBudget* budget = host->budget();
  if (budget != nullptr) budget->EnterCoroutine(co);
  lua_State* const outer = host->running();
  host->set_running(co);
  int nres = 0;
  const int status = lua_resume(co, L, narg, &nres);
  host->set_running(outer);
  // Stopped for good while co ran (interrupt_watch.hpp): stop here too, even if Lua caught it.
  if (host->terminating()) return host->RaiseTerminating(L);
  if (budget != nullptr) budget->Sync(L);  // a kill inside co reaches this thread's next instruction
  if (status == LUA_OK || status == LUA_YIELD) {
    if (!lua_checkstack(L, nres + 1)) {
      lua_pop(co, nres);
      lua_pushboolean(L, 0);
      lua_pushliteral(L, "too many results to resume");
      return 2;
    }
    lua_pushboolean(L, 1);
    lua_xmove(co, L, nres);
    return nres + 1;
  }
  lua_pushboolean(L, 0);
  lua_xmove(co, L, 1);  // the error value
  return 2;
}

// coroutine.status(co): Lua's answer, except for the main thread, which is
// "normal" from any other thread (it is what runs, or resumed, whatever
// runs: a task, or a coroutine of a call from JS), never "suspended".
int l_co_status(lua_State* L) {
  lua_State* co = lua_tothread(L, 1);
  luaL_argexpected(L, co != nullptr, 1, "thread");
  const char* name;
  if (co == L) {
    name = "running";
  } else if (co == LuaHost::From(L)->main()) {
    name = "normal";
  } else if (lua_status(co) == LUA_YIELD) {
    name = "suspended";
  } else if (lua_status(co) != LUA_OK) {
    name = "dead";
  } else {
    lua_Debug ar;
    name = lua_getstack(co, 0, &ar) ? "normal" : lua_gettop(co) == 0 ? "dead" : "suspended";
  }
  lua_pushstring(L, name);
  return 1;
}

// Lua glue: resume/wrap pass-through, tasks.wait, require, namazu.coroutine.
constexpr const char kPrelude[] = R"lua(
local SENTINEL, tasks, join, LOADED, PRELOAD, RESOLVE, is_task, is_killed, raw_resume, raw_status, MAIN = ...
local co = coroutine
local create, yield, close, isyieldable = co.create, co.yield, co.close, co.isyieldable
local resume, status = raw_resume, raw_status
local error, type, select, setmetatable = error, type, select, setmetatable

-- A coroutine the CPU budget killed runs no hooks any more: its <close>
-- handlers are not run (nothing could stop one that loops), as for a task.
local function close_unless_killed(c)
  if is_killed(c) then return false, "killed: CPU budget exceeded (its <close> handlers are not run)" end
  return close(c)
end

-- Cancelling a task unwinds the task's own coroutine, not the nested ones
-- suspended inside its wait. This guard, pending in the frame that passed
-- the wait up, closes the nested coroutine then, so its <close> variables
-- run too. A normal resume disarms it.
local guard_mt = {__close = function(g)
  local c = g[1]
  if c then
    g[1] = nil
    close_unless_killed(c)
  end
end}
local function disarm(g, ...)
  g[1] = nil
  return ...
end
local function relay(c, ...)
  local g <close> = setmetatable({c}, guard_mt)
  return disarm(g, resume(c, yield(...)))
end

-- A sentinel yield from a nested coroutine is an API wait of the task:
-- pass it up, and hand what the task is resumed with back down.
local function pass(c, ok, ...)
  if ok and select("#", ...) > 0 and (...) == SENTINEL then
    if not isyieldable() then
      error("cannot suspend the task here (inside a metamethod, a C function or a call from JS)", 0)
    end
    return pass(c, relay(c, ...))
  end
  return ok, ...
end

-- resume (l_co_resume) refuses a task's coroutine and the main thread; so
-- does close: a task's coroutine is cancelled through the task, and closing
-- the main thread would empty its stack (the traceback handler with it).
co.resume = function(c, ...)
  return pass(c, resume(c, ...))
end
co.status = status

co.close = function(c)
  if is_task(c) then error("cannot close a task's coroutine (cancel the task: tasks.cancel(id))", 2) end
  if c == MAIN then error("cannot close the runtime's main thread (it runs the calls from JS; it is no coroutine)", 2) end
  return close_unless_killed(c)
end

co.wrap = function(f)
  local c = create(f)
  local function finish(ok, ...)
    if ok then return ... end
    local err = ...
    if status(c) == "dead" then close_unless_killed(c) end
    if type(err) == "string" then error(err, 2) end
    error(err, 0)
  end
  return function(...)
    return finish(pass(c, resume(c, ...)))
  end
end

local function joined(ok, ...)
  if ok == true then return ... end
  if ok == false then error((...), 0) end
  return nil, (...)
end
tasks.wait = function(id)
  return joined(join(id))
end

if not require then
  -- name -> id of the task running the module's top level, while that top
  -- level waits (tasks.sleep, a JS Promise): another task requiring it then
  -- waits for it rather than running the module a second time, looking
  -- again after 1, 2, 4 ... ms (at most 50: such modules are rare, and a
  -- wake-up list would have to be woken from the <close> of a cancel).
  -- Cleared when the top level ends, fails or is cancelled.
  local loading = {}
  -- task id -> the module it waits for another task to load. A task about to
  -- wait follows owner -> the module that owner waits for -> its owner ...:
  -- reaching itself is a require loop across tasks, which would wait for ever.
  local waiting_for = {}
  local current_id, status, sleep = tasks.current_id, tasks.status, tasks.sleep
  local loaded_mt = {__close = function(mark)
    if loading[mark[1]] == mark[2] then loading[mark[1]] = nil end
  end}
  local waiting_mt = {__close = function(mark) waiting_for[mark[1]] = nil end}
  local function waits_on(owner, id)
    for _ = 1, 1000 do
      if owner == id then return true end
      local name = waiting_for[owner]
      owner = name and loading[name]
      if not owner then return false end
      local st = status(owner)  -- a killed task's marks stay (no <close> ran): not a loop through it
      if owner ~= id and st ~= "running" and st ~= "waiting" then return false end
    end
    return false
  end
  local function load_module(name, loader, id)
    local mark <close> = id and setmetatable({name, id}, loaded_mt)
    if id then loading[name] = id end
    local v = loader(name)
    if v == nil then v = true end
    LOADED[name] = v
    return v
  end
  require = function(name)
    if type(name) ~= "string" then
      error("bad argument #1 to 'require' (string expected, got " .. type(name) .. ")", 2)
    end
    local v = LOADED[name]
    if v ~= nil then return v end
    local loader = PRELOAD[name]
    if loader == nil then
      error("module '" .. name .. "' not found (modules come from the Runtime's modules and modulePaths options)", 2)
    end
    local id = current_id()
    local pause = 0.001
    local mark <close> = loading[name] and id and setmetatable({id}, waiting_mt)
    while loading[name] do
      local owner = loading[name]
      if owner == id then error("module '" .. name .. "' requires itself while it loads (a require loop)", 2) end
      local st = status(owner)
      if st ~= "running" and st ~= "waiting" then break end  -- killed while loading: no <close> ran
      if waits_on(owner, id) then
        error("module '" .. name .. "' is loading in task " .. owner .. ", which waits for a module this task loads (a require loop)", 2)
      end
      if not id then
        error("module '" .. name .. "' is loading in task " .. owner .. " (its top level waits); require it from a task to wait for it", 2)
      end
      waiting_for[id] = name
      sleep(pause)
      if pause < 0.05 then pause = pause * 2 end
      v = LOADED[name]
      if v ~= nil then return v end
    end
    if id then waiting_for[id] = nil end  -- loading it ourselves now
    return load_module(name, loader, id)
  end
end

-- rt.start("a.b.fn"): globals first, then modules, requiring them if needed
-- (longest module name first). Needs the string library to split the path.
-- A module that exists but fails to load raises its error (the first such),
-- which says more than "not a Lua function".
local gmatch, sfind = string and string.gmatch, string and string.find
local function resolve(path)
  if not gmatch then return nil end
  local parts = {}
  for part in gmatch(path, "[^.]+") do parts[#parts + 1] = part end
  local failed
  for i = #parts - 1, 1, -1 do
    local name = parts[1]
    for j = 2, i do name = name .. "." .. parts[j] end
    local ok, m = pcall(require, name)
    if not ok and failed == nil and not (type(m) == "string" and sfind(m, "module '" .. name .. "' not found", 1, true)) then
      failed = m
    end
    if ok and type(m) == "table" then
      local v = m
      for j = i + 1, #parts do
        if type(v) ~= "table" then v = nil break end
        v = rawget(v, parts[j])
      end
      if type(v) == "function" then return v end
    end
  end
  if failed ~= nil then error(failed, 0) end
  return nil
end
RESOLVE[1] = resolve

local namazu = {
  current_task_id = tasks.current_id,
  start = tasks.start,
  resume = tasks.resume,
}
LOADED["tasks"] = tasks
LOADED["namazu.coroutine"] = namazu
)lua";

const luaL_Reg kTasksFuncs[] = {
    {"sleep", l_tasks_sleep},   {"current_id", l_tasks_current_id}, {"start", l_tasks_start},
    {"resume", l_tasks_resume}, {"cancel", l_tasks_cancel},         {"status", l_tasks_status},
    {"send", l_tasks_send},     {"receive", l_tasks_receive},       {nullptr, nullptr},
};

}  // namespace

void PreloadModule(lua_State* L, std::string_view name) {
  lua_getfield(L, LUA_REGISTRYINDEX, kPreloadKey);  // value, PRELOAD
  lua_insert(L, -2);
  lua_pushlstring(L, name.data(), name.size());  // the whole name: it may hold a NUL
  lua_insert(L, -2);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

void RegisterTasksApi(lua_State* L, Scheduler* scheduler) {
  scheduler->CacheNames(L);
  RegisterCodedError(L);
  // coroutine.yield -> l_co_yield
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_getfield(L, -1, LUA_COLIBNAME);
  if (lua_istable(L, -1)) {
    lua_pushlightuserdata(L, scheduler);
    lua_pushcclosure(L, l_co_yield, 1);
    lua_setfield(L, -2, "yield");
  }
  lua_pop(L, 2);

  // The tasks module.
  lua_newtable(L);
  lua_pushlightuserdata(L, scheduler);
  luaL_setfuncs(L, kTasksFuncs, 1);
  lua_createtable(L, 0, 6);
  for (const char* k : {"IMMEDIATE", "FOR", "UNTIL_TIME", "UNTIL_NEXT", "INDEFINITELY", "COMMIT"}) {
    lua_pushstring(L, k);
    lua_setfield(L, -2, k);
  }
  lua_setfield(L, -2, "instruction");
  lua_createtable(L, 0, 2);
  for (const char* k : {"SCHEDULER", "COMMIT"}) {
    lua_pushstring(L, k);
    lua_setfield(L, -2, k);
  }
  lua_setfield(L, -2, "reason");
  lua_createtable(L, 0, 7);
  for (const char* k : {"NANOSECONDS", "MICROSECONDS", "MILLISECONDS", "SECONDS", "MINUTES", "HOURS", "DAYS"}) {
    lua_pushstring(L, k);
    lua_setfield(L, -2, k);
  }
  lua_setfield(L, -2, "unit");
  lua_newtable(L);
  lua_setfield(L, -2, "state");  // in memory until a store is configured (DESIGN §8)
  const int tasks = lua_gettop(L);

  // Where require looks: package.preload when the package library is open.
  lua_getglobal(L, "package");
  if (lua_istable(L, -1)) {
    lua_getfield(L, -1, "preload");
  } else {
    lua_newtable(L);
  }
  lua_setfield(L, LUA_REGISTRYINDEX, kPreloadKey);
  lua_pop(L, 1);

  if (luaL_loadbufferx(L, kPrelude, sizeof(kPrelude) - 1, "=lua-tasks", "t") != LUA_OK) lua_error(L);
  lua_pushlightuserdata(L, scheduler);  // the sentinel
  lua_pushvalue(L, tasks);
  lua_pushlightuserdata(L, scheduler);
  lua_pushcclosure(L, l_tasks_join, 1);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_getfield(L, LUA_REGISTRYINDEX, kPreloadKey);
  lua_newtable(L);  // RESOLVE: the prelude stores its resolver at [1]
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, kResolveRegistryKey);
  lua_pushcfunction(L, l_co_has_mark<LuaHost::HasTaskMark>);
  lua_pushcfunction(L, l_co_has_mark<LuaHost::HasKilledMark>);
  lua_pushcfunction(L, l_co_resume);
  lua_pushcfunction(L, l_co_status);
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  lua_call(L, 11, 0);

  lua_setglobal(L, "tasks");
}

}  // namespace lua_tasks
