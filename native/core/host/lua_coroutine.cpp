// SPDX-License-Identifier: MIT
// coroutine.close that tells the host which coroutine runs, so an interrupt reaches it.
#include "core/host/lua_coroutine.hpp"

#include "core/host/lua_host.hpp"

namespace lua_tasks {

namespace {

// coroutine.close(co): Lua's own (upvalue 1), called with co as running(),
// since the <close> handlers it runs run on co: one that loops there was out
// of the interrupt's reach, and worker.terminate() waited for ever.
int l_coroutine_close(lua_State* L) {
  lua_State* co = lua_tothread(L, 1);
  luaL_argexpected(L, co != nullptr, 1, "coroutine");
  lua_settop(L, 1);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  LuaHost* host = LuaHost::From(L);
  // Protected, so running() is restored before any error goes on.
  const int status = host->PCallOn(co, L, 1, LUA_MULTRET);
  if (host->terminating()) return host->RaiseTerminating(L);
  if (status != LUA_OK) return lua_error(L);  // "cannot close a running coroutine", as raised
  return lua_gettop(L);
}

}  // namespace

void ReplaceCoroutineClose(lua_State* L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  if (lua_getfield(L, -1, LUA_COLIBNAME) == LUA_TTABLE) {
    lua_getfield(L, -1, "close");
    lua_pushcclosure(L, l_coroutine_close, 1);
    lua_setfield(L, -2, "close");
  }
  lua_pop(L, 2);
}

}  // namespace lua_tasks
