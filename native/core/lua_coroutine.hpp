// SPDX-License-Identifier: MIT
// coroutine.resume and coroutine.close that tell the host which coroutine runs, so an interrupt reaches it.
#pragma once

#include <lua.hpp>

namespace lua_tasks {

// Replaces coroutine.resume and coroutine.close in the coroutine library, if
// it is open. Same behaviour as Lua's; what they add is that
// LuaHost::current() names the coroutine running Lua code (resume runs its
// body, close runs its pending <close> handlers), which is where an interrupt
// (InterruptWatch) sets its hook: hooks are per coroutine, and one spinning
// in a nested coroutine would never see a hook set on its resumer.
// Stack: unchanged.
void ReplaceCoroutineResume(lua_State* L);

}  // namespace lua_tasks
