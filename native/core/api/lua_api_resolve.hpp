// SPDX-License-Identifier: MIT
// The "mod.fn" resolver: finds a function by a dotted path in modules, requiring them if needed.
#pragma once

#include <lua.hpp>

namespace lua_tasks {

// Stores resolve(path) -> function | nil in the table at
// kResolveRegistryKey, [1]. rt.start("a.b.fn") calls it when the path names
// no loaded function: it requires "a.b", then "a" (longest module name
// first), and a module that exists but fails to load raises its error.
// Install after RegisterRequireApi. Raises (memory): call in protected mode.
// Stack: unchanged.
void RegisterResolveApi(lua_State* L);

// Registry key of a table whose [1] is resolve(path) -> function | nil, which
// finds "mod.fn" in modules, requiring them if needed.
inline constexpr const char kResolveRegistryKey[] = "lua-tasks.resolve";

}  // namespace lua_tasks
