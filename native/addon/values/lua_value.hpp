// SPDX-License-Identifier: MIT
// LuaValue handles: Lua functions, coroutines and userdata held by JS.
#pragma once

#include <node_api.h>

#include <lua.hpp>

namespace lua_tasks {

class RuntimeCore;

// Returns a JS handle for the Lua value at `idx`: a function that calls it for
// a Lua function, else an opaque object ({ luaType }) that converts back to
// the same Lua value. Stack unchanged. Throws Napi::Error.
// A function made with `callback` (Lua handed it to JS as an argument) and
// called while no Lua code runs (from the loop, or from JS later) has no Lua
// caller to raise to, and its JS caller is usually Node's (a timer, an
// emitter, a promise reaction): a failure goes to the runtime's 'taskerror'
// path and the call returns undefined. Every other call throws to its
// caller; after close() every call throws ERR_RUNTIME_CLOSED.
napi_value WrapLuaValue(RuntimeCore* core, lua_State* L, int idx, bool callback = false);

// If `v` is a handle made by WrapLuaValue for this core's state, pushes the
// Lua value and returns true. A handle of another runtime gives
// ERR_CONVERSION. Returns false for anything else.
bool PushLuaValue(RuntimeCore* core, lua_State* L, napi_value v);

// Calls the Lua function below `nargs` arguments on L (already pushed) in
// protected mode and returns its first result as JS (or all results as an
// Array when `all`). Pops the function and arguments. Throws the JS error for
// a Lua failure. The caller has checked that the core is open.
napi_value CallLua(RuntimeCore* core, lua_State* L, int nargs, bool all);

}  // namespace lua_tasks
