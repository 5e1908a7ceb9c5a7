// SPDX-License-Identifier: MIT
// coroutine.resume and coroutine.close that tell the host which coroutine runs, so an interrupt reaches it.
#include "lua_coroutine.hpp"

#include "lua_host.hpp"

namespace lua_tasks {

namespace {

// Why `co` cannot be resumed from L, or nullptr if it can: it must be
// suspended (yielded, or not started: a function on an empty call stack).
const char* CannotResume(lua_State* L, lua_State* co) {
  if (co == L) return "cannot resume non-suspended coroutine";
  const int status = lua_status(co);
  if (status == LUA_YIELD) return nullptr;
  if (status != LUA_OK) return "cannot resume dead coroutine";
  lua_Debug ar;
  if (lua_getstack(co, 0, &ar) != 0) return "cannot resume non-suspended coroutine";  // it resumed someone
  if (lua_gettop(co) == 0) return "cannot resume dead coroutine";
  return nullptr;
}

int l_coroutine_resume(lua_State* L) {
  lua_State* co = lua_tothread(L, 1);
  luaL_argexpected(L, co != nullptr, 1, "coroutine");
  const int nargs = lua_gettop(L) - 1;
  const char* why = CannotResume(L, co);
  if (why == nullptr && !lua_checkstack(co, nargs)) why = "too many arguments to resume";
  if (why != nullptr) {
    lua_pushboolean(L, 0);
    lua_pushstring(L, why);
    return 2;
  }
  lua_xmove(L, co, nargs);
  LuaHost* host = LuaHost::From(L);
  int nres = 0;
  const int status = host->ResumeNested(co, L, nargs, &nres);
  // Stopped for good while it ran: stop here too, even if Lua caught it.
  if (host->terminating()) return host->RaiseTerminating(L);
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
  lua_xmove(co, L, 1);  // the error object
  return 2;
}

// coroutine.close(co): Lua's own (upvalue 1), called with co as current(),
// since the <close> handlers it runs run on co: one that loops there was out
// of the interrupt's reach, and worker.terminate() waited for ever.
int l_coroutine_close(lua_State* L) {
  lua_State* co = lua_tothread(L, 1);
  luaL_argexpected(L, co != nullptr, 1, "coroutine");
  lua_settop(L, 1);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  LuaHost* host = LuaHost::From(L);
  // Protected, so current() is restored before any error goes on.
  const int status = host->PCallOn(co, L, 1, LUA_MULTRET);
  if (host->terminating()) return host->RaiseTerminating(L);
  if (status != LUA_OK) return lua_error(L);  // "cannot close a running coroutine", as raised
  return lua_gettop(L);
}

}  // namespace

void ReplaceCoroutineResume(lua_State* L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  if (lua_getfield(L, -1, LUA_COLIBNAME) == LUA_TTABLE) {
    lua_pushcfunction(L, l_coroutine_resume);
    lua_setfield(L, -2, "resume");
    lua_getfield(L, -1, "close");
    lua_pushcclosure(L, l_coroutine_close, 1);
    lua_setfield(L, -2, "close");
  }
  lua_pop(L, 2);
}

}  // namespace lua_tasks
