// SPDX-License-Identifier: MIT
// The Lua API of a runtime: every family over the scheduler, installed in the order they depend on.
#pragma once

#include <lua.hpp>

namespace lua_tasks {

class KeyedStore;
class Scheduler;

// Installs, in this order: the scheduler's cached names, the coded-error
// metatable, coroutine.yield (lua_api_yield), the tasks table
// (lua_api_tasks) and its tasks.store over `store` (lua_api_store), the
// coroutine wrappers (lua_api_coroutine), require (lua_api_require) and the
// "mod.fn" resolver (lua_api_resolve). Raises on memory errors: call in
// protected mode. Stack: unchanged.
void RegisterLuaApi(lua_State* L, Scheduler* scheduler, KeyedStore* store);

}  // namespace lua_tasks
