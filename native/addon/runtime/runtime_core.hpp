// SPDX-License-Identifier: MIT
// RuntimeCore: what a Runtime and the JS handles of its Lua values share.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <node_api.h>

#include "addon/runtime/task_codes.hpp"
#include "addon/runtime/task_context.hpp"
#include "addon/runtime/uv_driver.hpp"
#include "core/base/clock.hpp"
#include "core/codec/state_codec.hpp"
#include "core/durable/index_restore.hpp"
#include "core/durable/journal_restore.hpp"
#include "core/host/lua_host.hpp"
#include "core/host/lua_runtime.hpp"
#include "core/scheduling/scheduler.hpp"
#include "core/store/pg_copy_rows.hpp"

namespace lua_tasks {

// Owned by shared_ptr: the Runtime JS object holds one, and so does every JS
// function or handle made from one of its Lua values, so the Lua state lives
// as long as anything can still reach it (or until close()).
// It is the LuaRuntime (host and scheduler, assembled by the Runtime
// constructor) with its Node side, and the scheduler's hooks: task ends go
// to the JS listener, schedule changes re-arm the loop driver.
class RuntimeCore : public std::enable_shared_from_this<RuntimeCore>, public SchedulerHooks, public LuaRuntime {
 public:
  explicit RuntimeCore(napi_env e) : env(e) {}
  // Collected unclosed (Node-API is alive: what it holds is let go) or
  // after the teardown hook (which let go of nothing, and left nothing).
  ~RuntimeCore() override { CloseNow(false, true); }
  RuntimeCore(const RuntimeCore&) = delete;
  RuntimeCore& operator=(const RuntimeCore&) = delete;

  // Once assembled: creates the loop driver, registers the cleanup hook.
  // `listener(owner, key, kind, value)` hears task ends; `owner` is the JS
  // Runtime, held weakly except while tasks wait on timers, the ready queue
  // or promises (as Node holds a pending timer's callback).
  void Attach(napi_value listener, napi_value owner, napi_value commit);

  // LuaHost's interrupt poll: true once this env can no longer run JS.
  static bool PollTerminating(void* ctx);

  // Bytes the Lua state holds now.
  size_t MemoryUsed() const { return host->memory().used; }
  // After host code pushed JS values (limit not enforced) with the state at
  // `before` bytes: whether they took it past memoryLimit. Only growth
  // counts: a state already past the limit (values from JS held earlier)
  // can still take small values, such as the nil that frees them.
  bool PastLimit(size_t before) const {
    const MemoryBudget& m = host->memory();
    return m.limit != 0 && m.used > m.limit && m.used > before;
  }
  // If the values pushed above `base` took the state past memoryLimit
  // (PastLimit), drops them, collects, and throws ERR_MEMORY_LIMIT, so the
  // limit holds for values coming from JS too.
  void CheckMemory(lua_State* L, int base, size_t before);
  // The same for Lua code that receives a JS value (a call's result, a field,
  // a promise's value) on top of L: replaces everything above `base` with the
  // error message and returns true (the caller raises it).
  bool RefuseIfPastLimit(lua_State* L, int base, size_t before);

  // Encodes tasks.state at once into *out; false with *error if it cannot
  // persist. (snapshot(): the one-shot form of the job below.)
  bool Snapshot(SnapshotBytes* out, std::string* error);
  // A failed snapshot's message: the encoder's, with the limit's advice
  // when the state passed maxValueBytes.
  std::string SnapshotError(const StateEncoder& encoder) const;

  // ---- Snapshot and restore in slices (runtime_persist.cpp's snapshot*/restore*) ----
  //
  // A 50 MB state takes 100-250 ms to encode or decode: done as jobs that
  // JS steps a few ms at a time, across loop turns, so the loop never stalls
  // for long (docs/design.md#persistence).
  //
  // Consistency rule: while a job is unfinished, nothing else runs on the
  // state. An unfinished job sets LuaHost's entry hook, so whatever enters
  // the state next from JS (load, get, set, preload, a call of a Lua function
  // handle, start, resume, cancel, a promise settling, a task run by a timer
  // or IMMEDIATE, close's cancellations), by whichever path, opens an Entry or
  // a HostSection and so first finishes the job synchronously; the result
  // waits for the next Step. A snapshot is therefore exactly tasks.state at
  // BeginSnapshot, and lua_next never sees a table change under it. A job
  // begun while Lua code is on the stack (JS called from Lua: that Lua goes on
  // afterwards without entering again) is finished at once. Beginning a job
  // opens a section, which finishes any other one: at most one is unfinished.
  //
  // Throws ERR_COMMIT_FAILED if a snapshot is in progress already.
  void BeginSnapshot();
  // Works on the snapshot for up to budget_ns. False while more remains;
  // true when it is done, with the snapshot moved into *out (the job ends).
  // Throws ERR_COMMIT_FAILED ("COMMIT failed: state.f: cannot persist a
  // function.") when the state cannot persist, or without a snapshot in
  // progress; the job ends.
  bool StepSnapshot(int64_t budget_ns, SnapshotBytes* out);
  // Drops a snapshot in progress, if any.
  void AbortSnapshot();
  // Starts decoding the bytes of `buffer` (a Uint8Array, held by a reference
  // until the job ends: the decoder reads it in place). Throws
  // ERR_COMMIT_FAILED if a restore is in progress already.
  void BeginRestore(napi_value buffer);
  // Works on the restore for up to budget_ns. False while more remains; true
  // once tasks.state holds the decoded value (the job ends). Throws, ending
  // the job, ERR_STORE_CORRUPT with the codec's reason as the message
  // ("corrupt state snapshot: checksum mismatch") for bytes that are not an
  // intact snapshot, ERR_MEMORY_LIMIT when the Lua stack cannot grow.
  bool StepRestore(int64_t budget_ns);
  // Drops a restore in progress, if any; tasks.state stays as it was.

  // True once close() was asked for: nothing new may enter Lua.
  bool closed() const { return closing_ || !host; }

  // Idempotent. Cancels every task, frees the state. While Lua code or host
  // code working on the state is on the stack (close() called from a JS
  // function that Lua called, a task-end listener, a getter read during a
  // conversion), the state is freed when the outermost entry returns.
  void Close();
  // Called after every outermost call into Lua.
  void AfterEntry() {
    if (closing_ && host && !host->busy()) CloseNow(true, true);
    if (host) ReportMemory();
  }
  // Runs f, a JS entry point that works on the Lua state, then AfterEntry,
  // also when f throws: a close() asked for meanwhile (by a getter during a
  // conversion, a listener hearing a task end) waited and happens there.
  template <typename F>
  auto Entered(F&& f) -> decltype(f()) {
    try {
      auto out = f();
      AfterEntry();
      return out;
    } catch (...) {
      AfterEntry();
      throw;
    }
  }

  // A Lua callback called while no Lua code ran has failed with `error`: the
  // JS listener hears it (EndKind::kCallbackFailed, key 0), or, when no
  // Runtime can hear it any more, a process warning says so. Never throws; a
  // throwing 'taskerror' listener leaves its exception pending, for the
  // callback's caller.
  void OnCallbackError(napi_value error);

  // SchedulerHooks
  void OnTaskEnd(Task& task, lua_State* co, const TaskEnding& end) override;
  void OnActivate(const std::string& id) override;
  // The JS function OnActivate calls: fn(owner, id).
  void SetActivate(napi_value fn);
  // The JS value a task ended with: its result, its error or undefined; and
  // its kind as the listener hears it. Throws Napi::Error.
  napi_value EndValue(const Task& task, lua_State* co, const TaskEnding& end, EndKind* kind);
  void OnScheduleChange() override;
  void OnJournal() override;
  void OnCommit(Task& task) override;
  uint32_t CaptureContext(bool by_lua) override { return contexts.Capture(by_lua ? host->entry_id() : 0); }
  bool SharesContext(const Task& starter) override { return contexts.Shares(starter); }
  void RetainContext(uint32_t context) override { contexts.Retain(context); }
  void ReleaseContext(uint32_t context) override { contexts.Release(context); }

  napi_env const env;
  TaskContexts contexts{env};  // the async context of each task's JS calls; outlives the scheduler (CloseNow)
  // host and scheduler (LuaRuntime) are null once closed. The clock outlives
  // the host, whose os.time reads it even in lua_close's finalizers: every
  // way out, ~RuntimeCore too, frees the host in CloseNow.
  OffsetClock<SystemClock> clock;              // wall offset: the clockOffsetMs option, rt.setClockOffset
  std::unique_ptr<UvDriver> driver;            // closes its handles asynchronously
  std::unique_ptr<JournalRestore> restoring;   // Runtime.open's durable records, restoreScan .. restoreEnd
  std::unique_ptr<IndexReader> index_reading;  // a JS store's index, indexFeed .. indexFinish
  std::unique_ptr<PgCopyRows> index_copy;      // a space of it as PostgreSQL COPY data, indexFeedCopy
  const void* jsref_mt[3] = {};  // identities of the JsRef metatables (function, object, error) in host's state
  napi_ref settle = nullptr;     // JS function settle(key, token, ok, value) for awaited promises
  napi_ref receiver = nullptr;   // `this` of the JS functions Lua calls: AddonData's object, held until closed
  // Handles made when a shared call scope opened (js_ref.cpp), valid while
  // it is open: the receiver, and the function of one JsRef box. Cleared
  // when that scope closes, the function when its box is collected, so a
  // match is a live handle of that very function.
  struct CallCache {
    void* scope = nullptr;
    napi_value recv = nullptr;
    const void* box = nullptr;
    napi_value fn = nullptr;
  } call_cache;
  std::string scratch;          // reused buffer for JS string -> Lua conversion
  size_t conversion_limit = 0;  // conversionLimit: bytes one conversion may produce (0 = no cap)

  // RAII, around Scheduler::Start for rt.start(): if the task it starts
  // (`key`) ends before Start returns, its end kind is kept here (kind()) and
  // its value, unless undefined, put into out[0], instead of calling the
  // listener: no JS call, and for most short tasks no property set either.
  // Nests (restores the outer start's).
  class DirectStart {
   public:
    DirectStart(RuntimeCore* core, uint64_t key, napi_value out)
        : core_(core), key_(core->direct_key_), out_(core->direct_out_), kind_(core->direct_kind_) {
      core->direct_key_ = key;
      core->direct_out_ = out;
      core->direct_kind_.reset();
    }
    ~DirectStart() {
      core_->direct_key_ = key_;
      core_->direct_out_ = out_;
      core_->direct_kind_ = kind_;
    }
    DirectStart(const DirectStart&) = delete;
    DirectStart& operator=(const DirectStart&) = delete;

    // How the task ended, as the listener would have heard it; none while it runs on.
    std::optional<EndKind> kind() const { return core_->direct_kind_; }

   private:
    RuntimeCore* core_;
    uint64_t key_;
    napi_value out_;
    std::optional<EndKind> kind_;
  };

 private:
  // notify: JS may run (close(), not a collection or teardown); release:
  // the references and async context are deleted (not during teardown,
  // where Node-API frees them itself).
  void CloseNow(bool notify, bool release);
  // The entry hook: finishes every unfinished job (see BeginSnapshot).
  static void FinishJobs(void* self);
  // Sets or clears the entry hook after a job changed.
  void ArmJobs();
  // Steps the restore (under a HostSection, hook cleared) and, once it is
  // done, puts the value in tasks.state.
  void AdvanceRestore(const Clock* clock, int64_t budget_ns);
  // Whether the restore's buffer still holds the bytes the decoder reads
  // (JS can detach or transfer it between slices).
  bool RestoreBytesIntact();
  void EndRestore();
  // Tells V8 how much memory the Lua state holds, so an unreachable runtime
  // holding a large state is collected as promptly as a large JS object.
  void ReportMemory();
  static void OnCleanup(napi_async_cleanup_hook_handle handle, void* arg);
  // Runs a scheduler step from a libuv callback: scopes, exceptions.
  void RunFromLoop(void (*step)(Scheduler*));

  bool closing_ = false;
  bool notify_ = true;       // false during teardown: no JS may run
  uint64_t direct_key_ = 0;  // see DirectStart
  napi_value direct_out_ = nullptr;
  std::optional<EndKind> direct_kind_;
  napi_ref listener_ = nullptr;  // JS onEnd(owner, key, kind, value); captures nothing
  napi_ref owner_ = nullptr;     // the JS Runtime: weak, strong while busy
  napi_ref commit_ = nullptr;    // JS commit(owner, bytes, settle, key, token)
  napi_ref activate_ = nullptr;  // JS activate(owner, id), for a runtime with dormant tasks
  napi_ref poll_fn_ = nullptr;   // a native no-op PollTerminating calls; lives until the state is freed
  bool owner_strong_ = false;
  int64_t reported_ = 0;                                   // bytes last reported to napi_adjust_external_memory
  napi_async_context async_ = nullptr;                     // for callback scopes from the loop
  napi_ref resource_ = nullptr;                            // their resource object
  napi_async_cleanup_hook_handle cleanup_hook_ = nullptr;  // removed once handles are closed
  // The sliced jobs; both hold a registry ref, so they go before host.
  std::unique_ptr<StateEncoder> encoder_;  // snapshotBegin .. the snapshotStep that ends it
  std::unique_ptr<StateDecoder> decoder_;  // restoreBegin .. the restoreStep that ends it
  napi_ref restore_buffer_ = nullptr;      // the Uint8Array decoder_ reads; strong while it runs
  const void* restore_data_ = nullptr;     // its bytes when the restore began
  size_t restore_length_ = 0;
  std::string restore_error_;  // a restore that could not go on (buffer detached)
};

}  // namespace lua_tasks
