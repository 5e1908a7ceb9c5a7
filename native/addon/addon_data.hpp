// SPDX-License-Identifier: MIT
// AddonData: the per-environment state of the addon (one per main thread or Worker).
#pragma once

#include <napi.h>

namespace lua_tasks {

// Lives as the Napi::Addon instance, so each Worker has its own; nothing in
// the addon is a process global.
struct AddonData {
  Napi::FunctionReference make_error;    // lib/errors.js makeError(code, message, props)
  Napi::FunctionReference await_helper;  // (promise, settle, key, token): calls settle(key, token, ok, v)
  Napi::FunctionReference warn_unheard;  // (error): a failure nobody can hear becomes a process warning
  Napi::FunctionReference map_ctor;      // globalThis.Map
  Napi::FunctionReference map_get;       // Map.prototype.get
  Napi::FunctionReference map_set;       // Map.prototype.set
  // The capability boundary (lib/runtime/boundary.js): none runs code of the value it looks at.
  Napi::ObjectReference receiver;         // `this` of every JS function Lua calls (frozen, no prototype)
  Napi::FunctionReference classify;       // (object) -> kind: plain, Map, by reference, error, opaque
  Napi::FunctionReference read_own;       // (object, key) -> an own data property, else undefined
  Napi::FunctionReference error_field;    // (thrown, key) -> message/name/code/stack as a string, or undefined
  Napi::FunctionReference error_text;     // (thrown) -> what tostring() of the error value gives
  Napi::FunctionReference unwrap_thrown;  // (value of a Napi::Error) -> what was thrown (a primitive comes wrapped)
  Napi::FunctionReference add_where;      // (thrown, { luaStack, source, line }): where it ended a task, if it has room
  Napi::FunctionReference map_size;       // (v): a Map's size (of any realm), -1 for anything else
  Napi::FunctionReference map_entries;    // Map.prototype.entries
  Napi::FunctionReference map_chunk;      // (it, out, max): next entries into out as key, value, ...; count
  Napi::FunctionReference lock_handle;    // the LockHandle class lockFile makes its handles of

  // The data of the environment `env` (defined in addon.cpp).
  static AddonData* From(napi_env env);
};

}  // namespace lua_tasks
