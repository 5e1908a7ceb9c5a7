// SPDX-License-Identifier: MIT
// NativeStore: a store directory's SQLite database as a JS object (lib/store/directory.js drives it).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <napi.h>
#include <uv.h>

#include "core/durable/journal_restore.hpp"
#include "core/store/store_db.hpp"
#include "core/store/store_writer.hpp"

namespace lua_tasks {

// new NativeStore(dir)                           the directory's <dir>/lua-tasks.sqlite (the directory exists)
//   write({ name, token, seq, state, writes }) -> Promise<void>
//       the batches written in one loop turn go to the writer together, from
//       a uv_check handle, and so land in one transaction
//   load(name) -> Promise<Buffer|null>           on the writer thread, after the writes before it
//   claim(name, token) -> Promise<void>          records the owner's fencing token
//   importSnapshot(name, bytes) -> Promise<bool> a migrated snapshot, unless the name has one
//   checkpoint() -> Promise<void>                the -wal into the database, truncated (after the writes before it)
//   get(name, key) -> Buffer|null                synchronous: a read-only connection on this thread
//   keys(name, prefix, after, limit) -> string[] synchronous, bytewise order
//   stats() -> { transactions, batches }
//   close()                                      finishes what was submitted, settles it, checkpoints; idempotent
//   failNextTransactions(n)                      test builds: the next n transactions fail at COMMIT
// The writer's outcomes come back through a uv_async handle. A Worker that
// exits with writes in flight stops the writer (it finishes them) and closes
// the handles from the environment's cleanup hook; the promises then never
// settle, as nothing is left to hear them.
class NativeStore : public Napi::ObjectWrap<NativeStore> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit NativeStore(const Napi::CallbackInfo& info);
  // The NativeStore `value` is, or nullptr for any other value (a type tag,
  // not a class check: a JS object cannot pass for one).
  static NativeStore* From(Napi::Value value);
  // Runtime.open's one pass over `name`'s durable records (spaces 2 and 3)
  // on this thread's read-only connection, into *out; throws a JS error
  // (ERR_STORE_CORRUPT for a damaged row) on failure.
  void ScanDurable(Napi::Env env, const std::string& name, JournalRestore* out);
  // Runs `read` on that connection: Runtime.open's read of the index, a
  // dormant task's activation. A StoreError becomes the same JS error.
  void Read(Napi::Env env, const std::function<void(StoreDb&)>& read);
  ~NativeStore() override;

 private:
  struct Handles;
  struct Pending {
    Napi::Promise::Deferred deferred;
    enum class Kind : uint8_t { kWrite, kLoad, kClaim, kImport, kCheckpoint } kind;
    std::string name;
    Napi::Reference<Napi::Value> lent;  // a Buffer whose bytes the writer reads (StoreBatch::borrowed_state)
  };

  Napi::Value JS_write(const Napi::CallbackInfo& info);
  Napi::Value JS_load(const Napi::CallbackInfo& info);
  Napi::Value JS_claim(const Napi::CallbackInfo& info);
  Napi::Value JS_importSnapshot(const Napi::CallbackInfo& info);
  Napi::Value JS_checkpoint(const Napi::CallbackInfo& info);
  Napi::Value JS_get(const Napi::CallbackInfo& info);
  Napi::Value JS_keys(const Napi::CallbackInfo& info);
  Napi::Value JS_names(const Napi::CallbackInfo& info);  // (glob, after, limit) -> the runtime names it knows
  Napi::Value JS_stats(const Napi::CallbackInfo& info);
  Napi::Value JS_close(const Napi::CallbackInfo& info);
#ifdef LUA_TASKS_TEST_HOOKS
  Napi::Value JS_failNextTransactions(const Napi::CallbackInfo& info);
#endif

  void CheckOpen(Napi::Env env, const char* method) const;
  // Queues a job; it goes to the writer from the next check phase.
  Napi::Value Queue(Napi::Env env, StoreJobBody body, Pending::Kind kind, std::string name,
                    Napi::Reference<Napi::Value> lent = {});
  void HandOver();              // the check phase: pending jobs to the writer
  void Deliver(Napi::Env env);  // settles the promises of the outcomes ready
  void Settle(Napi::Env env, StoreOutcome& o);
  void KeepAlive();
  // Stops the writer and closes the handles. `notify`: settle what finished
  // (not when the environment is being torn down).
  void Shutdown(bool notify);
  static void OnCleanup(napi_async_cleanup_hook_handle handle, void* arg);

  napi_env env_;
  std::string path_;
  std::unique_ptr<StoreWriter> writer_;
  std::unique_ptr<StoreDb> reader_;
  std::vector<StoreJob> queued_;  // this loop turn's jobs, not yet handed over
  std::unordered_map<uint64_t, Pending> pending_;
  uint64_t next_id_ = 1;
  StoreWriter::Stats stats_at_close_;
  Handles* handles_ = nullptr;  // owned by libuv from Shutdown until its close callbacks ran
  std::unique_ptr<Napi::AsyncContext> async_context_;
  bool closed_ = false;
  bool referenced_ = false;  // this object is kept from the GC while jobs are in flight
};

}  // namespace lua_tasks
