// SPDX-License-Identifier: MIT
// coroutine.close that tells the host which coroutine runs, so an interrupt reaches it.
#pragma once

#include <lua.hpp>

namespace lua_tasks {

// Replaces coroutine.close in the coroutine library, if it is open. Same
// behaviour as Lua's; what it adds is that LuaHost::running() names the
// coroutine whose pending <close> handlers run, which is where an interrupt
// (InterruptWatch) sets its hook: hooks are per coroutine, and a handler
// looping there would never see a hook set on the closer. (coroutine.resume
// does the same in lua_api_coroutine.cpp.) Stack: unchanged.
void ReplaceCoroutineClose(lua_State* L);

}  // namespace lua_tasks
