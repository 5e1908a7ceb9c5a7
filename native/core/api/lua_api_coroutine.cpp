// SPDX-License-Identifier: MIT
// coroutine.resume, wrap, close and status for tasks: a waiting coroutine detaches or passes its wait up.
//
// Design: API waits (tasks.sleep, tasks.wait, tasks.receive, a JS Promise)
// may be called from inside coroutines the user made: they store the wait in
// the task and yield a sentinel. coroutine.resume, called by a task's code,
// then detaches the coroutine: it becomes a part of the task that the
// scheduler runs on its own (scheduler_parts.cpp), and the resume returns
// true at once. coroutine.wrap and tasks.resume_inline pass the sentinel up
// to their own resumer and the resume values back down instead, until it
// reaches the task's thread (or a part's) and the scheduler.
#include "core/api/lua_api_coroutine.hpp"

#include "lua/coroutine.lua.hpp"

#include "core/host/lua_host.hpp"
#include "core/scheduling/scheduler.hpp"

namespace lua_tasks {

namespace {

// is_task(v) / is_killed(v): whether v is a coroutine with that mark (the
// coroutine of a live task; one the CPU budget's kill was raised in).
template <bool (*HasMark)(lua_State*)>
int l_co_has_mark(lua_State* L) {
  lua_pushboolean(L, lua_type(L, 1) == LUA_TTHREAD && HasMark(lua_tothread(L, 1)));
  return 1;
}

// A parked coroutine (a part that yielded plainly, Scheduler::ParkPlain):
// this resume returns what it yielded, as if it had run it there; the
// resume's own values are dropped (they would answer the API wait it was
// detached at, which had its own answer). The next resume continues it.
int TakeParked(lua_State* L, lua_State* co) {
  LuaHost::SetMark(co, LuaHost::kParkedMark, false);
  lua_settop(L, 1);
  const int n = lua_gettop(co);
  if (!lua_checkstack(L, n + 1)) {
    lua_settop(co, 0);
    lua_pushboolean(L, 0);
    lua_pushliteral(L, "too many results to resume");
    return 2;
  }
  lua_pushboolean(L, 1);
  lua_xmove(co, L, n);
  return n + 1;
}

// The coroutine (arg 1) yielded the sentinel of an API wait, popped: it
// becomes a detached part of the task and the resume returns true; in a
// durable task it is closed and the resume raises.
int DetachOrRefuse(lua_State* L, Scheduler* s) {
  lua_State* co = lua_tothread(L, 1);
  lua_pushvalue(L, 1);  // the thread, for the part's anchor
  Scheduler::DetachResult r;
  {
    LuaHost::HostSection section(s->host(), L);  // Detach allocates: never a Lua error in this frame
    r = s->Detach(L);
  }
  if (r == Scheduler::DetachResult::kDetached) {
    lua_settop(L, 0);
    lua_pushboolean(L, 1);
    return 1;
  }
  // A replay could not tell which part each journal record is of.
  const char* wait = WaitKindName(s->current()->pending_kind);
  s->current()->has_pending = false;
  LuaHost* host = LuaHost::From(L);
  lua_State* const outer = host->running();
  host->set_running(co);
  lua_resetthread(co);  // its <close> variables run (an error in one is dropped)
  host->set_running(outer);
  return luaL_error(L,
                    "coroutine.resume: the coroutine waits (%s) and would go on as a detached part of the task, "
                    "which a durable task cannot replay: resume it with tasks.resume_inline(co, ...) or "
                    "coroutine.wrap, which suspend the whole task while it waits",
                    wait);
}

// coroutine.resume's core (the C function itself with kDetach; lua/coroutine.lua
// wraps the other to pass API waits up, for coroutine.wrap and
// tasks.resume_inline): Lua's resume, plus what must hold for every
// coroutine run from Lua.
//  - A task's coroutine (coroutine.running() inside a task hands it out)
//    runs only under the scheduler: resumed behind its back, the task's stack
//    would change under a wait, a deferred start or a cancel. The main
//    thread is never a coroutine of Lua code's: resumed, Lua
//    would call what its stack holds (the traceback handler in slot 1) and
//    empty it, and every later error from JS would read "error in error
//    handling". Both are refused as a failed resume.
//  - The CPU budget sees the switch (CpuBudget::EnterCoroutine, Sync on the
//    way back), and LuaHost::running() follows it.
//  - A detached part runs under the scheduler: resumed, it is refused as
//    Lua refuses a "normal" coroutine. A parked one: TakeParked.
template <bool kDetach>
int l_co_resume(lua_State* L) {
  lua_State* co = lua_tothread(L, 1);
  luaL_argexpected(L, co != nullptr, 1, "thread");
  LuaHost* host = LuaHost::From(L);
  const char* refused = nullptr;
  if (LuaHost::HasTaskMark(co)) {
    refused = "cannot resume a task's coroutine (resume the task: tasks.resume(id))";
  } else if (co == host->main()) {
    refused = "cannot resume the runtime's main thread (it runs the calls from JS; it is no coroutine)";
  } else if (LuaHost::HasPartMark(co)) {
    refused = "cannot resume non-suspended coroutine";
  } else if (LuaHost::HasMark(co, LuaHost::kParkedMark) && lua_status(co) == LUA_YIELD) {
    return TakeParked(L, co);
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
  if (kDetach && status == LUA_YIELD && nres > 0) {
    auto* s = static_cast<Scheduler*>(lua_touserdata(L, lua_upvalueindex(1)));
    const Task* t = s->current();
    if (lua_touserdata(co, -nres) == s && t != nullptr && t->has_pending) {
      lua_pop(co, nres);
      return DetachOrRefuse(L, s);
    }
  }
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
  } else if (co == LuaHost::From(L)->main() || LuaHost::HasPartMark(co)) {
    name = "normal";  // a detached part: active under the scheduler, not resumable
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

}  // namespace

void RegisterCoroutineApi(lua_State* L, Scheduler* scheduler) {
  if (luaL_loadbufferx(L, kCoroutineLua, sizeof(kCoroutineLua) - 1, kCoroutineLuaName, "t") != LUA_OK) lua_error(L);
  lua_pushlightuserdata(L, scheduler);  // the sentinel
  lua_pushcfunction(L, l_co_has_mark<LuaHost::HasTaskMark>);
  lua_pushcfunction(L, l_co_has_mark<LuaHost::HasKilledMark>);
  lua_pushcfunction(L, l_co_has_mark<LuaHost::HasPartMark>);
  lua_pushlightuserdata(L, scheduler);
  lua_pushcclosure(L, l_co_resume<true>, 1);
  lua_pushlightuserdata(L, scheduler);
  lua_pushcclosure(L, l_co_resume<false>, 1);
  lua_pushcfunction(L, l_co_status);
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_getfield(L, -1, "tasks");
  lua_remove(L, -2);
  lua_call(L, 9, 0);
}

}  // namespace lua_tasks
