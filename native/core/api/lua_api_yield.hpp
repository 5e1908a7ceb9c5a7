// SPDX-License-Identifier: MIT
// coroutine.yield: reads a task's yield instruction where it is given and suspends the task.
#pragma once

#include <lua.hpp>

namespace lua_tasks {

class Scheduler;

// Replaces coroutine.yield, if the coroutine library is open, with one that
// on a task's own thread parses its instruction (yield_instruction.hpp),
// pends it (Task::Pend) and yields; elsewhere it is Lua's plain yield.
// The scheduler then files the wait and wakes the task (scheduler.cpp).
// Install before RegisterCoroutineApi, whose pass-through yields with it.
// Raises (memory): call in protected mode. Stack: unchanged.
void RegisterYieldApi(lua_State* L, Scheduler* scheduler);

}  // namespace lua_tasks
