// SPDX-License-Identifier: MIT
// Lists the Lua API returns: marked, so an empty one still crosses to JS as an Array.
#pragma once

#include <lua.hpp>

namespace lua_tasks {

// Marks the table at idx as a list (a metatable the runtime shares among
// them, holding nothing). A table with no keys is the same for an empty list
// and an empty record; the mark tells them apart when it reaches JS, where an
// empty list must be [] and not {}.
void MarkList(lua_State* L, int idx);

// Whether the table at idx carries that mark.
bool IsMarkedList(lua_State* L, int idx);

}  // namespace lua_tasks
