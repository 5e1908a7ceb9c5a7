// SPDX-License-Identifier: MIT
// Where a task is: its coroutine's Lua traceback, read without resuming it (rt.inspect's `where`).
#pragma once

#include <string>

#include <lua.hpp>

#include "core/host/lua_host.hpp"

namespace lua_tasks {

struct TaskWhere {
  std::string traceback;  // luaL_traceback's text ("stack traceback:\n\t...")
  std::string source;     // the innermost frame with a source line ("quest.lua"), "" if none
  int line = 0;           // its line (0: none: a task not started yet, or only C frames)
  std::string entry;      // the outermost Lua function's definition ("quest.lua:12"), "" if none
};

// Reads co's stack from L (the host's current thread), for a person: co
// is suspended (a waiting task) or L itself (a task asking about itself
// from JS it called). Nothing of co changes. Runs in protected mode, with
// the memory limit lifted (a HostSection: a traceback is bounded, about 22
// frames); never raises and leaves L's stack as it was. False, with
// *error, if it could not (memory).
bool ReadWhere(LuaHost* host, lua_State* L, lua_State* co, TaskWhere* out, std::string* error);

}  // namespace lua_tasks
