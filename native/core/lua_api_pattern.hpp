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

}  // namespace lua_tasks
