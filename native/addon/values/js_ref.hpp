// SPDX-License-Identifier: MIT
// JsRef: a JS value held by Lua, as a capability: a function to call, an object to read, an error value.
#pragma once

#include <string_view>

#include <node_api.h>

#include <napi.h>
#include <lua.hpp>

namespace lua_tasks {

class RuntimeCore;

// Creates the JsRef metatables in the core's state and tasks.await. Call
// once, in a HostSection. `trusted_objects` (the Runtime option
// trustedObjects): field reads on a by-reference object behave as in JS
// (getters, prototype chain) and tostring coerces, instead of own data
// properties only.
void RegisterJsRef(RuntimeCore* core, lua_State* L, bool trusted_objects);

// Pushes a Lua value holding `v` by reference: when `callable`, a Lua
// function that calls it (and nothing more: no fields); else a userdata whose
// fields are the object's own data properties. A strong reference keeps `v`
// alive until Lua collects the value (or the state closes).
void PushJsRef(RuntimeCore* core, lua_State* L, napi_value v, bool callable);

// Names the JS function at `idx` (a Lua function from PushJsRef; anything
// else is left alone) `name` in durable journals: rt.set gives the global's
// name, which the Lua code calls it by. Stack unchanged. Raises (memory).
void NameJsFunction(lua_State* L, int idx, std::string_view name);

// If the Lua value at `idx` holds a JS value (from PushJsRef or
// PushJsError), returns it; else nullptr. Stack unchanged.
napi_value JsRefValue(RuntimeCore* core, lua_State* L, int idx);

// If the Lua value at `idx` is an error value (PushJsError), returns the JS
// value it holds; else nullptr. Stack unchanged.
napi_value JsErrorValue(RuntimeCore* core, lua_State* L, int idx);

// Pushes an error value for a JS value thrown into Lua (any value: an Error,
// a string, a function...): pcall returns it; .message, .name, .code and
// .stack read as strings (or nil) and tostring gives "name: message", all
// without running any code of the value; it cannot be indexed further or
// called. It reaches JS (rethrown, returned, passed) as the same value.
void PushJsError(RuntimeCore* core, lua_State* L, napi_value thrown);

// Closes a handle scope that calls out of Lua shared (LuaHost::CallScope),
// and forgets what was kept in it.
void CloseCallScope(RuntimeCore* core, void* scope);

// Pushes the error value for the JS exception `e` carries (PushJsError of
// what was thrown), without running any code of it. Never throws.
void PushJsException(RuntimeCore* core, lua_State* L, const Napi::Error& e) noexcept;

}  // namespace lua_tasks
