// SPDX-License-Identifier: MIT
// Runtime: the JS class over one Lua state (lib/runtime/runtime.js wraps it).
// Its methods live by concern: runtime.cpp (the class, Lua values and
// tasks), runtime_modules.cpp (modules), runtime_persist.cpp (snapshot,
// restore, tasks.store's batches and the commit lock), runtime_inspect.cpp
// (a task's details, a journal's history, the replay-only mode).
#pragma once

#include <memory>

#include <napi.h>

#include "addon/runtime/runtime_core.hpp"

namespace lua_tasks {

class Runtime : public Napi::ObjectWrap<Runtime> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit Runtime(const Napi::CallbackInfo& info);

 private:
  // new NativeRuntime({ libs, libList, memoryLimit }, print)
  Napi::Value JS_load(const Napi::CallbackInfo& info);       // (source, name|undefined) -> Array
  Napi::Value JS_set(const Napi::CallbackInfo& info);        // (name, value)
  Napi::Value JS_get(const Napi::CallbackInfo& info);        // (name) -> value
  Napi::Value JS_close(const Napi::CallbackInfo& info);      // () -> undefined
  Napi::Value JS_stats(const Napi::CallbackInfo& info);      // () -> { memoryUsed, memoryPeak, memoryLimit, tasks }
  Napi::Value JS_start(const Napi::CallbackInfo& info);      // (fn: path | Lua function, args[], out) -> PackStart
  Napi::Value JS_resume(const Napi::CallbackInfo& info);     // (id, args[]) -> boolean | 2 (resume after the unlock)
  Napi::Value JS_send(const Napi::CallbackInfo& info);       // (id, args[]) -> boolean; throws ERR_MAILBOX_FULL
  Napi::Value JS_cancel(const Napi::CallbackInfo& info);     // (id) -> boolean
  Napi::Value JS_taskState(const Napi::CallbackInfo& info);  // (id) -> PackState(status, wait) | undefined
  Napi::Value JS_taskUntil(
      const Napi::CallbackInfo& info);  // (id) -> end of a timed wait (FOR, UNTIL_*) in wall ms | undefined
  Napi::Value JS_tasks(const Napi::CallbackInfo& info);      // () -> [key, state, until, ...] per live task
  Napi::Value JS_waits(const Napi::CallbackInfo& info);      // () -> [tasks per wait code..., longest wait ms | -1]
  Napi::Value JS_idPrefix(const Napi::CallbackInfo& info);   // ids are prefix + base-36 key
  Napi::Value JS_keepAlive(const Napi::CallbackInfo& info);  // (bool)
  Napi::Value JS_setClockOffset(const Napi::CallbackInfo& info);  // (ms) added to the wall clock
  Napi::Value JS_preload(const Napi::CallbackInfo& info);         // (name, source | value)
  Napi::Value JS_isLoaded(const Napi::CallbackInfo& info);     // (name) -> whether require(name) has its value already
  Napi::Value JS_modulePaths(const Napi::CallbackInfo& info);  // (find, readFile): require and dofile from files
#ifdef LUA_TASKS_TEST_HOOKS
  Napi::Value JS_snapshot(const Napi::CallbackInfo& info);  // () -> Buffer of tasks.state, at once
  Napi::Value JS_restore(const Napi::CallbackInfo& info);   // (Buffer) -> sets tasks.state, at once
#endif
  // The same in slices across loop turns (RuntimeCore::BeginSnapshot has the
  // consistency rule). Errors: ERR_COMMIT_FAILED for a state that cannot
  // persist ("COMMIT failed: state.f: cannot persist a function."),
  // ERR_STORE_CORRUPT for a snapshot that cannot be read (message: the
  // codec's reason, e.g. "corrupt state snapshot: checksum mismatch"; lib
  // adds the runtime and the file). A failed step ends its job.
  Napi::Value JS_snapshotBegin(const Napi::CallbackInfo& info);  // () -> undefined; tasks.state as of now
  Napi::Value JS_snapshotStep(const Napi::CallbackInfo& info);   // (budgetMs) -> undefined while more remains | Buffer
  Napi::Value JS_snapshotAbort(const Napi::CallbackInfo& info);  // () -> undefined (no-op without a snapshot)
  Napi::Value JS_restoreBegin(const Napi::CallbackInfo& info);   // (Uint8Array, held until the end) -> undefined
  Napi::Value JS_restoreStep(
      const Napi::CallbackInfo& info);  // (budgetMs) -> false while more remains | true: tasks.state set
  // tasks.store's side of a COMMIT (lib/runtime/commit_queue.js): the batch is taken
  // with the snapshot, then confirmed durable or put back after a failure.
  Napi::Value JS_setStoreReader(const Napi::CallbackInfo& info);  // (reader | undefined): store.reader(name)'s object
  Napi::Value JS_takeWrites(const Napi::CallbackInfo& info);      // () -> [keys, bytes, ends] | null (packed)
  Napi::Value JS_confirmWrites(const Napi::CallbackInfo& info);   // () the batch taken is durable
  Napi::Value JS_putBackWrites(const Napi::CallbackInfo& info);   // (batch) its keys not written since are dirty again
  // Durable tasks (docs/durable.md): their records, written with the batch.
  Napi::Value JS_takeJournal(const Napi::CallbackInfo& info);     // () -> a journal batch (opaque) | null
  Napi::Value JS_journalRecords(const Napi::CallbackInfo& info);  // (batch) -> [{ space: 2 | 3 | 4, key, value }]
  Napi::Value JS_journalBytes(const Napi::CallbackInfo& info);    // (batch) -> bytes of its keys and values
  Napi::Value JS_putBackJournal(const Napi::CallbackInfo& info);  // (batch, or records) of a failed write
  // Runtime.open's restore of durable tasks (docs/durable.md#restore): their
  // records read in one pass, then each task started from its own.
  Napi::Value JS_restoreScan(const Napi::CallbackInfo& info);    // (NativeStore, name): the store's scan, natively
  Napi::Value JS_restoreFeed(const Napi::CallbackInfo& info);    // (space, keys, records): a page of a JS reader's
  Napi::Value JS_restoreTasks(const Napi::CallbackInfo& info);   // () -> [[id, entry, key] | [id, null, key, ...end]
                                                                 //        | [id, false, why]]
  Napi::Value JS_restoreInbox(const Napi::CallbackInfo& info);   // (id) its messages back into its mailbox
  Napi::Value JS_restoreIndex(const Napi::CallbackInfo& info);   // (NativeStore, name) -> false | [dormant, id, key...]
  Napi::Value JS_restoreOne(const Napi::CallbackInfo& info);     // (NativeStore, name, id) -> [description] | []
  Napi::Value JS_indexMark(const Napi::CallbackInfo& info);      // (record) -> the index mark's payload | null
  Napi::Value JS_indexFeed(const Napi::CallbackInfo& info);      // (space 3 | 4, keys[], records[])
  Napi::Value JS_indexFeedCopy(const Napi::CallbackInfo& info);  // (space 3 | 4, COPY chunk | null: its end)
  Napi::Value JS_indexNow(const Napi::CallbackInfo& info);       // () -> [id, ...] whose journals are read now
  Napi::Value JS_indexFinish(const Napi::CallbackInfo& info);    // () -> [dormant, [id, key...], [id, why...]]
  Napi::Value JS_restoreDescribe(const Napi::CallbackInfo& info);  // (id) -> [description] (restoreOne's, read)
  Napi::Value JS_activate(const Napi::CallbackInfo& info);         // (id) -> whether it is being read (async reads)
  Napi::Value JS_activated(const Napi::CallbackInfo& info);        // (id): its restore ended (Replayer::Activated)
  Napi::Value JS_writeIndex(const Napi::CallbackInfo& info);       // (retained ids) a name's index, written whole
  Napi::Value JS_dormantTasks(const Napi::CallbackInfo& info);     // () -> [id, state, until, ...] per dormant task
  Napi::Value JS_setActivate(const Napi::CallbackInfo& info);      // (fn(owner, id)) activates a dormant task
  Napi::Value JS_restoreEnd(const Napi::CallbackInfo& info);       // () what was not taken is dropped
  Napi::Value JS_forgetDurable(const Napi::CallbackInfo& info);    // (id) its end record goes
  Napi::Value JS_pauseCollector(const Napi::CallbackInfo& info);   // (paused) while durable tasks are restored
  Napi::Value JS_setDurable(const Napi::CallbackInfo& info);  // (ok, retain ends, skip missed cron instants, indexed,
                                                              //  async reads, index mark)
  // Inspection (runtime_inspect.cpp; docs/api.md#inspecting-a-task).
  Napi::Value JS_inspect(
      const Napi::CallbackInfo& info);  // (id, where) -> { durable, entry?, key?, where? } | undefined
  Napi::Value JS_describeRecords(const Napi::CallbackInfo& info);  // (keys, records) -> a history, one object a record
  Napi::Value JS_setReplayOnly(const Napi::CallbackInfo& info);    // (true): `lua-tasks replay`'s mode
  Napi::Value JS_lock(const Napi::CallbackInfo& info);             // () commit lock, for rt.commit()
  Napi::Value JS_unlock(const Napi::CallbackInfo& info);           // ()

  RuntimeCore* OpenCore(Napi::Env env);

  // Shared with every JS handle of this state's values; the state is closed by
  // close(), by the environment cleanup hook, or when the last owner goes.
  std::shared_ptr<RuntimeCore> core_;
};

}  // namespace lua_tasks
