// SPDX-License-Identifier: MIT
// coroutine.resume, wrap, close and status as tasks need them: a task's waits pass through, its coroutine is refused.
//
// Design: API waits (tasks.sleep, tasks.wait, tasks.receive) may be called
// from inside coroutines the user made: they store the instruction and yield
// a sentinel, and the wrapped coroutine.resume / coroutine.wrap pass a
// sentinel yield up to their own resumer and the resume values back down,
// until it reaches the task's thread and the scheduler.
#include "core/api/lua_api_coroutine.hpp"

#include "lua/coroutine.lua.hpp"

#include "core/host/lua_host.hpp"

namespace lua_tasks {

namespace {

// is_task(v) / is_killed(v): whether v is a coroutine with that mark (the
// coroutine of a live task; one the CPU budget's kill was raised in).
template <bool (*HasMark)(lua_State*)>
int l_co_has_mark(lua_State* L) {
  lua_pushboolean(L, lua_type(L, 1) == LUA_TTHREAD && HasMark(lua_tothread(L, 1)));
  return 1;
}

// coroutine.resume's core (lua/coroutine.lua wraps it to pass API waits up):
// Lua's resume, plus what must hold for every coroutine run from Lua.
//  - A task's coroutine (coroutine.running() inside a task hands it out)
//    runs only under the scheduler: resumed behind its back, the task's stack
//    would change under a wait, a deferred start or a cancel. The main
//    thread is never a coroutine of Lua code's: resumed, Lua
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

}  // namespace

void RegisterCoroutineApi(lua_State* L, Scheduler* scheduler) {
  if (luaL_loadbufferx(L, kCoroutineLua, sizeof(kCoroutineLua) - 1, kCoroutineLuaName, "t") != LUA_OK) lua_error(L);
  lua_pushlightuserdata(L, scheduler);  // the sentinel
  lua_pushcfunction(L, l_co_has_mark<LuaHost::HasTaskMark>);
  lua_pushcfunction(L, l_co_has_mark<LuaHost::HasKilledMark>);
  lua_pushcfunction(L, l_co_resume);
  lua_pushcfunction(L, l_co_status);
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  lua_call(L, 6, 0);
}

}  // namespace lua_tasks
