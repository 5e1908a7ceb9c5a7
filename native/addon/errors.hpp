// SPDX-License-Identifier: MIT
// Coded errors: every error the addon raises is built by lib/errors.js.
#pragma once

#include <string>

#include <napi.h>

namespace lua_tasks {

// Builds an error of lib/errors.js for `code` (docs/design.md#errors), with optional
// extra fields in `props`.
Napi::Value MakeError(Napi::Env env, const char* code, const std::string& message, Napi::Object props = Napi::Object());

// Throws it as a Napi::Error (a C++ exception node-addon-api rethrows in JS).
[[noreturn]] void ThrowError(Napi::Env env, const char* code, const std::string& message);

// Throws the JS exception pending on env, or a generic one naming `what`.
[[noreturn]] void ThrowPending(napi_env env, const char* what);

// Checks a raw Node-API status.
inline void Check(napi_env env, napi_status status, const char* what) {
  if (status != napi_ok) ThrowPending(env, what);
}

}  // namespace lua_tasks
