// SPDX-License-Identifier: MIT
// string.find, match, gmatch and gsub over PatternMatcher: the stock functions' behaviour, but stoppable.
#pragma once

#include <lua.hpp>

namespace lua_tasks {

// Asked by the pattern functions while they match.
struct PatternStop {
  // Every PatternMatcher::kCheckEvery steps: true stops the match.
  bool (*should_stop)(void* ctx);
  // Raises the error that ends a stopped call (must not return).
  int (*raise)(void* ctx, lua_State* L);
  void* ctx;  // not owned; must live as long as the Lua state
};

// Sets find, match, gmatch and gsub in the table at `table` (the string
// library: it is also the strings' metatable __index, so s:find is ours too).
// Raises on memory errors: call in protected mode. Stack: unchanged.
void RegisterPatternFunctions(lua_State* L, int table, const PatternStop& stop);

// The pattern functions of a runtime: RegisterPatternFunctions on the string
// library, if it is open, stopped by LuaHost::StopDue and raising its stop.
// Lua's own match runs whole inside one C call, out of the count hook's
// reach, and some patterns backtrack for minutes. Every runtime gets them
// (the stop check is also how Lua is stopped for reasons other than a
// taskTimeout): LuaRuntime passes it as LuaHostOptions::install_apis.
// Raises (memory): call in protected mode. Stack: unchanged.
void RegisterPatternApi(lua_State* L);

}  // namespace lua_tasks
