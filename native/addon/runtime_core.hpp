// SPDX-License-Identifier: MIT
// RuntimeCore: what a Runtime and the JS handles of its Lua values share.
#pragma once

#include <memory>
#include <string>

#include <node_api.h>

#include "lua_host.hpp"

namespace lua_tasks {

// Owned by shared_ptr: the Runtime JS object holds one, and so does every JS
// function or handle made from one of its Lua values, so the Lua state lives
// as long as anything can still reach it (or until close()).
class RuntimeCore : public std::enable_shared_from_this<RuntimeCore> {
 public:
  explicit RuntimeCore(napi_env e) : env(e) {}
  ~RuntimeCore() { CloseNow(); }
  RuntimeCore(const RuntimeCore&) = delete;
  RuntimeCore& operator=(const RuntimeCore&) = delete;

  // Registers the environment cleanup hook; call once the host exists.
  void AttachCleanupHook();

  // True once close() was asked for: nothing new may enter Lua.
  bool closed() const { return closing_ || !host; }

  // Idempotent. While Lua code is on the stack (close() called from a JS
  // function that Lua called), the state is freed when the outermost call
  // into Lua returns.
  void Close();
  // Called after every outermost call into Lua.
  void AfterEntry() {
    if (closing_ && host && host->depth() == 0) CloseNow();
  }

  napi_env const env;
  std::unique_ptr<LuaHost> host;  // null once closed
  const void* jsref_mt = nullptr;  // identity of the JsRef metatable in host's state
  std::string scratch;             // reused buffer for JS string -> Lua conversion

 private:
  void CloseNow();
  static void OnCleanup(napi_async_cleanup_hook_handle handle, void* arg);

  bool closing_ = false;
  napi_async_cleanup_hook_handle cleanup_hook_ = nullptr;  // removed when closed
};

}  // namespace lua_tasks
