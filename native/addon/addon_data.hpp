// SPDX-License-Identifier: MIT
// AddonData: the per-environment state of the addon (one per main thread or Worker).
#pragma once

#include <napi.h>

namespace lua_tasks {

// Lives as the Napi::Addon instance, so each Worker has its own; nothing in
// the addon is a process global.
struct AddonData {
  Napi::FunctionReference make_error;        // lib/errors.js makeError(code, message, props)
  Napi::FunctionReference await_helper;      // (promise, settle, key, token): calls settle(key, token, ok, v)
  Napi::FunctionReference warn_unheard;      // (error): a failure nobody can hear becomes a process warning
  Napi::FunctionReference map_ctor;          // globalThis.Map
  Napi::FunctionReference map_get;           // Map.prototype.get
  Napi::FunctionReference map_set;           // Map.prototype.set
  Napi::FunctionReference object_to_string;  // Object.prototype.toString, for the Map test
  Napi::FunctionReference map_size;          // (v): a Map's size (of any realm), -1 for anything else
  Napi::FunctionReference map_entries;       // Map.prototype.entries
  Napi::FunctionReference map_chunk;         // (it, out, max): next entries into out as key, value, ...; count

  // The data of the environment `env` (defined in addon.cpp).
  static AddonData* From(napi_env env);
};

}  // namespace lua_tasks
