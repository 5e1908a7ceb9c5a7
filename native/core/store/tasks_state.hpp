// SPDX-License-Identifier: MIT
// tasks.state: the table a runtime persists, read for a snapshot and set by a restore.
#pragma once

#include <lua.hpp>

namespace lua_tasks {

// Both find the tasks module in package.loaded, raw (no metamethod runs);
// both need 4 free stack slots and raise only for memory (call them from
// host code: a HostSection lifts the limit).

// Pushes tasks.state onto L, or nil without a tasks module. Stack: +1.
void PushTasksState(lua_State* L);

// Sets tasks.state to the value at `idx`; nothing without a tasks module.
// Stack: unchanged.
void SetTasksState(lua_State* L, int idx);

}  // namespace lua_tasks
