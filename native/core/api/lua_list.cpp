// SPDX-License-Identifier: MIT
#include "core/api/lua_list.hpp"

namespace lua_tasks {

namespace {
constexpr const char* kListMeta = "lua-tasks.list";
}

void MarkList(lua_State* L, int idx) {
  idx = lua_absindex(L, idx);
  luaL_newmetatable(L, kListMeta);  // made once per state, then found in the registry
  lua_setmetatable(L, idx);
}

bool IsMarkedList(lua_State* L, int idx) {
  if (!lua_getmetatable(L, idx)) return false;
  luaL_getmetatable(L, kListMeta);
  const bool marked = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return marked;
}

}  // namespace lua_tasks
