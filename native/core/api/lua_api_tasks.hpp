// SPDX-License-Identifier: MIT
// The tasks table: start, resume, send, receive, cancel, status, wait, sleep, current_id; and namazu.coroutine.
#pragma once

#include <lua.hpp>

namespace lua_tasks {

class Scheduler;

// Creates the tasks table (global `tasks`, and require("tasks")) with its
// functions and constants, and require("namazu.coroutine"). The waits it
// starts (sleep, wait, receive) yield from a coroutine of the user's through
// the resume wrappers (RegisterCoroutineApi). Raises (memory): call in
// protected mode. Stack: unchanged.
void RegisterTasksApi(lua_State* L, Scheduler* scheduler);

}  // namespace lua_tasks
