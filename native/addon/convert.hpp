// SPDX-License-Identifier: MIT
// Value conversion between JS and Lua (DESIGN §5).
#pragma once

#include <node_api.h>

#include <lua.hpp>

namespace lua_tasks {

class RuntimeCore;

// Deepest table/object nesting either way; deeper values give ERR_CONVERSION.
// 200 keeps the recursion well inside V8's stack limit even in a Worker or an
// ASan build, where frames are several times larger.
inline constexpr int kMaxConvertDepth = 200;

// Pushes the Lua equivalent of `v` onto L (exactly one value). The caller is
// in a HostSection (no Lua code runs here, allocations cannot fail for the
// limit). Throws Napi::Error: ERR_CONVERSION, a RangeError for a BigInt
// outside int64, or the JS exception of a throwing getter. After a throw, L's
// stack may hold partial values: the caller restores its top.
void PushJs(RuntimeCore* core, lua_State* L, napi_value v);

// Returns the JS equivalent of the Lua value at `idx`. Leaves L's stack as it
// was. Throws Napi::Error (ERR_CONVERSION) for what cannot cross.
// `handed`: Lua passes the value to JS as an argument of a call, so the Lua
// functions in it become callbacks (see WrapLuaValue).
napi_value ToJs(RuntimeCore* core, lua_State* L, int idx, bool handed = false);

// Builds the JS error for a failed load/pcall: `status` is the Lua status and
// the error value is on top of L's stack (left there). A JS value thrown
// through Lua comes back as the very same value.
// `traceback` overrides the host's last recorded one (task errors, read off
// the failed coroutine).
napi_value LuaErrorToJs(RuntimeCore* core, lua_State* L, int status, const char* traceback = nullptr);

}  // namespace lua_tasks
