// SPDX-License-Identifier: MIT
// coroutine.resume, wrap, close and status for tasks: a waiting coroutine detaches or passes its wait up.
#pragma once

#include <lua.hpp>

namespace lua_tasks {

class Scheduler;

// Replaces coroutine.resume, wrap, close and status (the coroutine library
// must be open) and adds tasks.resume_inline. A wait the tasks API starts
// inside a coroutine of the user's yields the scheduler's address as a
// sentinel; coroutine.resume detaches that coroutine (Scheduler::Detach),
// coroutine.wrap and tasks.resume_inline pass it up to their own resumer, and
// the resume values back down, until it reaches the task's thread
// (lua_api_yield.cpp). Install after RegisterYieldApi, whose coroutine.yield
// the pass-through uses, and RegisterTasksApi, whose table it adds to.
// Raises (memory): call in protected mode. Stack: unchanged.
void RegisterCoroutineApi(lua_State* L, Scheduler* scheduler);

}  // namespace lua_tasks
