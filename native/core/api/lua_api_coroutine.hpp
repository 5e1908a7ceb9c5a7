// SPDX-License-Identifier: MIT
// coroutine.resume, wrap, close and status as tasks need them: a task's waits pass through, its coroutine is refused.
#pragma once

#include <lua.hpp>

namespace lua_tasks {

class Scheduler;

// Replaces coroutine.resume, wrap, close and status (the coroutine library
// must be open). A wait the tasks API starts inside a coroutine of the
// user's yields the scheduler's address as a sentinel; the resume wrappers
// pass it up to their own resumer, and the resume values back down, until it
// reaches the task's thread (lua_api_yield.cpp). Install after
// RegisterYieldApi, whose coroutine.yield the pass-through uses.
// Raises (memory): call in protected mode. Stack: unchanged.
void RegisterCoroutineApi(lua_State* L, Scheduler* scheduler);

}  // namespace lua_tasks
