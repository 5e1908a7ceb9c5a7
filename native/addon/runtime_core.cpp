// SPDX-License-Identifier: MIT
// RuntimeCore: what a Runtime and the JS handles of its Lua values share.
#include "runtime_core.hpp"

namespace lua_tasks {

void RuntimeCore::AttachCleanupHook() {
  // The async hook, not napi_add_env_cleanup_hook: the sync one crashes
  // Workers on exit when it touches handles (DESIGN §2).
  napi_add_async_cleanup_hook(env, OnCleanup, this, &cleanup_hook_);
}

void RuntimeCore::OnCleanup(napi_async_cleanup_hook_handle handle, void* arg) {
  auto* core = static_cast<RuntimeCore*>(arg);
  core->cleanup_hook_ = nullptr;  // removed below, not again by CloseNow
  core->closing_ = true;
  core->host.reset();
  napi_remove_async_cleanup_hook(handle);
}

void RuntimeCore::Close() {
  closing_ = true;
  if (host && host->depth() > 0) return;  // AfterEntry finishes it
  CloseNow();
}

void RuntimeCore::CloseNow() {
  closing_ = true;
  host.reset();  // lua_close runs __gc of JS references, which need env alive
  if (cleanup_hook_ != nullptr) {
    napi_remove_async_cleanup_hook(cleanup_hook_);
    cleanup_hook_ = nullptr;
  }
}

}  // namespace lua_tasks
