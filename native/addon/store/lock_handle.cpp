// SPDX-License-Identifier: MIT
// LockHandle: a held FileLock as a JS object; binding.lockFile takes one.
#include "addon/store/lock_handle.hpp"

#include <string>
#include <utility>

#include <uv.h>

#include "addon/addon_data.hpp"

namespace lua_tasks {

namespace {

// The error Node's fs gives: "EACCES: permission denied, open '/x/a.lock'".
Napi::Error SystemError(Napi::Env env, int error, const char* syscall, const std::string& path) {
  const std::string code = uv_err_name(-error);
  Napi::Error e = Napi::Error::New(env, code + ": " + uv_strerror(-error) + ", " + syscall + " '" + path + "'");
  e.Set("errno", Napi::Number::New(env, -error));
  e.Set("code", Napi::String::New(env, code));
  e.Set("syscall", Napi::String::New(env, syscall));
  e.Set("path", Napi::String::New(env, path));
  return e;
}

Napi::Value JS_lockFile(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::string path = info[0].As<Napi::String>().Utf8Value();
  Napi::Function record_for = info[1].As<Napi::Function>();
  LockAttempt a = TryLockFile(path, [&](std::string_view previous) {
    return record_for.Call({Napi::String::New(env, previous.data(), previous.size())}).As<Napi::String>().Utf8Value();
  });
  Napi::Object out = Napi::Object::New(env);
  switch (a.outcome) {
    case LockOutcome::kAcquired: {
      Napi::Object handle = AddonData::From(env)->lock_handle.New({});
      LockHandle::Unwrap(handle)->Hold(std::move(a.lock));
      out.Set("ok", true);
      out.Set("handle", handle);
      return out;
    }
    case LockOutcome::kHeld:
      out.Set("ok", false);
      out.Set("holder", Napi::String::New(env, a.record.data(), a.record.size()));
      return out;
    case LockOutcome::kFailed:
      break;
  }
  throw SystemError(env, a.error, a.syscall, path);
}

}  // namespace

Napi::Function LockHandle::Init(Napi::Env env) {
  return DefineClass(env, "LockHandle", {InstanceMethod<&LockHandle::JS_release>("release")});
}

LockHandle::LockHandle(const Napi::CallbackInfo& info) : Napi::ObjectWrap<LockHandle>(info), env_(info.Env()) {}

void LockHandle::Hold(FileLock lock) {
  Release();
  lock_ = std::move(lock);
  // Not the async cleanup hook Runtime needs: closing a descriptor touches
  // no libuv handle, and the lock must be gone before the Worker's 'exit'.
  napi_add_env_cleanup_hook(env_, &LockHandle::OnEnvCleanup, this);
  hooked_ = true;
}

void LockHandle::Release() {
  if (hooked_) napi_remove_env_cleanup_hook(env_, &LockHandle::OnEnvCleanup, this);
  hooked_ = false;
  lock_.Release();
}

void LockHandle::OnEnvCleanup(void* arg) {
  auto* self = static_cast<LockHandle*>(arg);
  self->hooked_ = false;  // Node drops the hook once it ran
  self->lock_.Release();
}

Napi::Value LockHandle::JS_release(const Napi::CallbackInfo& info) {
  Release();
  return info.Env().Undefined();
}

void InitFileLock(Napi::Env env, Napi::Object exports) {
  exports.Set("lockFile", Napi::Function::New(env, JS_lockFile, "lockFile"));
}

}  // namespace lua_tasks
