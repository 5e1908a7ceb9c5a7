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

// For the calls that name a task by id (resume, send, cancel, wait): when
// arg 1 names a dormant durable task that a store reading asynchronously
// is restoring (docs/durable.md#restore-at-open), the running task waits
// for the restore (WaitKind::kRestore) and `k` then makes the call again,
// which finds the task live. Returns -1 when there is nothing to wait for;
// else it yields (or raises outside a task that can wait).
int AwaitRestore(lua_State* L, Scheduler* s, const char* fname, lua_KFunction k, lua_KContext ctx = 0);

}  // namespace lua_tasks
