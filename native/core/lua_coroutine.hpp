// SPDX-License-Identifier: MIT
// coroutine.resume that tells the host which coroutine runs, so an interrupt reaches it.
#pragma once

#include <lua.hpp>

namespace lua_tasks {

// Replaces coroutine.resume in the coroutine library, if it is open. Same
// behaviour as Lua's; what it adds is that LuaHost::current() names the
// coroutine running Lua code, which is where an interrupt (InterruptWatch)
// sets its hook: hooks are per coroutine, and one spinning in a nested
// coroutine would never see a hook set on its resumer.
// Stack: unchanged.
void ReplaceCoroutineResume(lua_State* L);

}  // namespace lua_tasks
