// SPDX-License-Identifier: MIT
// The Lua face of the scheduler: coroutine.yield instructions, tasks, namazu.coroutine, require.
#pragma once

#include <string_view>

#include <lua.hpp>

namespace lua_tasks {

class Scheduler;

// Installs everything into L's globals and module tables. Raises on memory
// errors: call in protected mode. Stack: unchanged.
void RegisterTasksApi(lua_State* L, Scheduler* scheduler);

// Registers `name` as a module whose loader is the function on top of L's
// stack (popped): require(name) calls it once. Raises (memory).
void PreloadModule(lua_State* L, std::string_view name);

// Registry key of the table `require` consults for loaders.
inline constexpr const char kPreloadRegistryKey[] = "lua-tasks.preload";
// Registry key of a table whose [1] is resolve(path) -> function | nil, which
// finds "mod.fn" in modules, requiring them if needed.
inline constexpr const char kResolveRegistryKey[] = "lua-tasks.resolve";

}  // namespace lua_tasks
