// SPDX-License-Identifier: MIT
// JsRef: a JS value held by Lua (a function to call, an object kept by identity).
#pragma once

#include <node_api.h>

#include <lua.hpp>

namespace lua_tasks {

class RuntimeCore;

// Creates the JsRef metatable in the core's state. Call once, in a HostSection.
void RegisterJsRef(RuntimeCore* core, lua_State* L);

// Pushes a Lua value holding `v`: a Lua function that calls it when
// `callable`, else a userdata. A strong reference keeps `v` alive until Lua
// collects the value (or the state closes).
void PushJsRef(RuntimeCore* core, lua_State* L, napi_value v, bool callable);

// If the Lua value at `idx` holds a JS value (from PushJsRef or a JS error
// thrown into Lua), returns it; else nullptr. Stack unchanged.
napi_value JsRefValue(RuntimeCore* core, lua_State* L, int idx);

// Pushes a userdata holding a JS value thrown into Lua: Lua sees it as an
// error value (pcall returns it; tostring gives the JS message; .message,
// .code, .name and .stack read through), and it reaches JS as the same value.
void PushJsError(RuntimeCore* core, lua_State* L, napi_value thrown);

}  // namespace lua_tasks
