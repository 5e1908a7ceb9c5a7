// SPDX-License-Identifier: MIT
// Where a task is: its coroutine's Lua traceback, read without resuming it (see task_where.hpp).
#include "core/scheduling/task_where.hpp"

namespace lua_tasks {

namespace {

// [co as a light userdata] -> [traceback]. Owns no C++ object: it may
// raise (memory) into the lua_pcall below.
int l_traceback(lua_State* L) {
  auto* co = static_cast<lua_State*>(lua_touserdata(L, 1));
  luaL_traceback(L, co, nullptr, co == L ? 1 : 0);  // on its own thread, level 0 is this function
  return 1;
}

}  // namespace

bool ReadWhere(LuaHost* host, lua_State* L, lua_State* co, TaskWhere* out, std::string* error) {
  LuaHost::HostSection section(host, L);
  if (!lua_checkstack(L, 3)) {
    *error = "no stack room to read its traceback";
    return false;
  }
  const int top = lua_gettop(L);
  lua_pushcfunction(L, l_traceback);
  lua_pushlightuserdata(L, co);  // not the thread object: co's stack is not touched
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    const char* m = lua_tostring(L, -1);
    *error = m != nullptr ? m : "its traceback could not be read";
    lua_settop(L, top);
    return false;
  }
  size_t len = 0;
  const char* text = lua_tolstring(L, -1, &len);
  out->traceback.assign(text, len);
  lua_settop(L, top);
  lua_Debug ar;
  out->line = 0;
  out->source.clear();
  out->entry.clear();
  for (int level = 0; lua_getstack(co, level, &ar) != 0; ++level) {
    if (lua_getinfo(co, "Sl", &ar) == 0) continue;
    if (out->line == 0 && ar.currentline > 0) {
      out->source = ar.short_src;
      out->line = ar.currentline;
    }
    if (ar.what != nullptr && ar.what[0] != 'C' && ar.linedefined >= 0) {
      out->entry = std::string(ar.short_src) + ":" + std::to_string(ar.linedefined);
    }
  }
  return true;
}

}  // namespace lua_tasks
