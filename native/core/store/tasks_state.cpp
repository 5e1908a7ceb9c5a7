// SPDX-License-Identifier: MIT
// tasks.state: the table a runtime persists, read for a snapshot and set by a restore.
#include "core/store/tasks_state.hpp"

namespace lua_tasks {

namespace {

// Pushes package.loaded.tasks (raw), whatever it is. Stack: +1.
void PushTasksModule(lua_State* L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_pushliteral(L, "tasks");
  lua_rawget(L, -2);
  lua_remove(L, -2);
}

}  // namespace

void PushTasksState(lua_State* L) {
  PushTasksModule(L);
  if (lua_istable(L, -1)) {
    lua_pushliteral(L, "state");
    lua_rawget(L, -2);
  } else {
    lua_pushnil(L);
  }
  lua_remove(L, -2);
}

void SetTasksState(lua_State* L, int idx) {
  idx = lua_absindex(L, idx);
  PushTasksModule(L);
  if (lua_istable(L, -1)) {
    lua_pushliteral(L, "state");
    lua_pushvalue(L, idx);
    lua_rawset(L, -3);
  }
  lua_pop(L, 1);
}

}  // namespace lua_tasks
