// SPDX-License-Identifier: MIT
// The "mod.fn" resolver: finds a function by a dotted path in modules, requiring them if needed.
#include "core/api/lua_api_resolve.hpp"

#include "lua/resolve.lua.hpp"

namespace lua_tasks {

void RegisterResolveApi(lua_State* L) {
  if (luaL_loadbufferx(L, kResolveLua, sizeof(kResolveLua) - 1, kResolveLuaName, "t") != LUA_OK) lua_error(L);
  lua_newtable(L);  // RESOLVE: the chunk stores its resolver at [1]
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, kResolveRegistryKey);
  lua_call(L, 1, 0);
}

}  // namespace lua_tasks
