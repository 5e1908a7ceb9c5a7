// SPDX-License-Identifier: MIT
// require: modules from the runtime's preload table, loaded once even when tasks require them at the same time.
#pragma once

#include <string_view>

#include <lua.hpp>

namespace lua_tasks {

// Makes package.preload (or, without the package library, a table of its
// own) the table require consults for loaders, and without the package
// library installs our require over it: a module whose top level waits is
// loaded once, other tasks requiring it wait for it, and a require loop
// across tasks is an error. Install after RegisterTasksApi (it uses
// tasks.current_id, status and sleep). Raises (memory): call in protected
// mode. Stack: unchanged.
void RegisterRequireApi(lua_State* L);

// Registers `name` as a module whose loader is the function on top of L's
// stack (popped): require(name) calls it once. Raises (memory).
void PreloadModule(lua_State* L, std::string_view name);

// Registry key of the table `require` consults for loaders.
inline constexpr const char kPreloadRegistryKey[] = "lua-tasks.preload";

}  // namespace lua_tasks
