// SPDX-License-Identifier: MIT
// LockHandle: a held FileLock as a JS object; binding.lockFile takes one.
#pragma once

#include <napi.h>

#include "core/store/file_lock.hpp"

namespace lua_tasks {

// Released by release(), or at the latest when the JS environment ends (a
// Worker that exits without closing its runtime), or when the handle is
// collected: the lock never outlives the environment that took it.
class LockHandle : public Napi::ObjectWrap<LockHandle> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit LockHandle(const Napi::CallbackInfo& info);
  ~LockHandle() override { Release(); }

  // Takes over `lock`, which is held.
  void Hold(FileLock lock);

 private:
  Napi::Value JS_release(const Napi::CallbackInfo& info);  // () -> undefined; idempotent
  void Release();
  static void OnEnvCleanup(void* arg);

  FileLock lock_;
  napi_env env_;
  bool hooked_ = false;  // OnEnvCleanup is registered for this handle (while lock_ is held)
};

// Adds lockFile(path, recordFor) to `exports`:
//   recordFor(previous: string) -> string   called once the lock is taken, with
//     the record the file held; what it returns becomes the file's content.
//   -> { ok: true, handle }  the lock is held until handle.release()
//   -> { ok: false, holder } another open file holds it; holder is its record
//   throws a Node-style system error (code, errno, syscall, path) when the
//   file cannot be opened, locked, read or written.
// AddonData::lock_handle must hold LockHandle::Init's class.
void InitFileLock(Napi::Env env, Napi::Object exports);

}  // namespace lua_tasks
