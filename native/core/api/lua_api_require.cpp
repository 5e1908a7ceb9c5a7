// SPDX-License-Identifier: MIT
// require: modules from the runtime's preload table, loaded once even when tasks require them at the same time.
#include "core/api/lua_api_require.hpp"

#include "lua/require.lua.hpp"

namespace lua_tasks {

void PreloadModule(lua_State* L, std::string_view name) {
  lua_getfield(L, LUA_REGISTRYINDEX, kPreloadRegistryKey);  // value, PRELOAD
  lua_insert(L, -2);
  lua_pushlstring(L, name.data(), name.size());  // the whole name: it may hold a NUL
  lua_insert(L, -2);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

void RegisterRequireApi(lua_State* L) {
  // Where require looks: package.preload when the package library is open.
  lua_getglobal(L, "package");
  if (lua_istable(L, -1)) {
    lua_getfield(L, -1, "preload");
  } else {
    lua_newtable(L);
  }
  lua_setfield(L, LUA_REGISTRYINDEX, kPreloadRegistryKey);
  lua_pop(L, 1);

  if (luaL_loadbufferx(L, kRequireLua, sizeof(kRequireLua) - 1, kRequireLuaName, "t") != LUA_OK) lua_error(L);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_getfield(L, -1, "tasks");
  lua_insert(L, -2);
  lua_getfield(L, LUA_REGISTRYINDEX, kPreloadRegistryKey);
  lua_call(L, 3, 0);
}

}  // namespace lua_tasks
