// SPDX-License-Identifier: MIT
// Coded errors: every error the addon raises is built by lib/errors.js.
#include "addon/errors.hpp"

#include "addon/addon_data.hpp"

namespace lua_tasks {

Napi::Value MakeError(Napi::Env env, const char* code, const std::string& message, Napi::Object props) {
  AddonData* data = AddonData::From(env);
  if (data == nullptr || data->make_error.IsEmpty()) {
    Napi::Error e = Napi::Error::New(env, message);
    e.Set("code", Napi::String::New(env, code));
    return e.Value();
  }
  napi_value p = props.IsEmpty() ? env.Undefined() : static_cast<napi_value>(props);
  return data->make_error.Call({Napi::String::New(env, code), Napi::String::New(env, message), p});
}

void ThrowError(Napi::Env env, const char* code, const std::string& message) {
  throw Napi::Error(env, MakeError(env, code, message));
}

void ThrowPending(napi_env env, const char* what) {
  bool pending = false;
  napi_is_exception_pending(env, &pending);
  if (pending) throw Napi::Error::New(env);  // takes the pending exception
  const napi_extended_error_info* info = nullptr;
  napi_get_last_error_info(env, &info);
  std::string msg = std::string("lua-tasks: ") + what + " failed";
  if (info != nullptr && info->error_message != nullptr) msg += std::string(": ") + info->error_message;
  throw Napi::Error::New(env, msg);
}

}  // namespace lua_tasks
