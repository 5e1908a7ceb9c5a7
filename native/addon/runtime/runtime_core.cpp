// SPDX-License-Identifier: MIT
// RuntimeCore: what a Runtime and the JS handles of its Lua values share.
#include "addon/runtime/runtime_core.hpp"

#include <napi.h>

#include "addon/addon_data.hpp"
#include "addon/errors.hpp"
#include "addon/store/store_reader.hpp"
#include "addon/values/convert.hpp"
#include "addon/values/js_ref.hpp"
#include "core/codec/state_codec.hpp"
#include "core/store/persist_limits.hpp"
#include "core/store/tasks_state.hpp"

namespace lua_tasks {

namespace {

struct SettleData {
  std::weak_ptr<RuntimeCore> core;  // the promise may outlive the runtime
};

// settle(key, token, ok, value): a promise a task awaited has settled.
napi_value Settle(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  void* data;
  napi_get_cb_info(env, info, &argc, argv, nullptr, &data);
  std::shared_ptr<RuntimeCore> core = static_cast<SettleData*>(data)->core.lock();
  if (!core || core->closed()) return nullptr;
  double key_d = 0;
  uint32_t token = 0;
  bool ok = false;
  // Only lib calls it; arguments of another shape settle nothing.
  if (napi_get_value_double(env, argv[0], &key_d) != napi_ok ||
      napi_get_value_uint32(env, argv[1], &token) != napi_ok || napi_get_value_bool(env, argv[2], &ok) != napi_ok) {
    return nullptr;
  }
  // The task, or the detached part of one, that awaits it.
  const auto key = static_cast<uint64_t>(key_d);
  Task* t = core->scheduler->Awaiting(key, token);
  // A cancelled or finished task, or a late settlement: ignored.
  const WaitKind wait = t != nullptr ? t->SettledBy(token) : WaitKind::kNone;
  if (wait == WaitKind::kNone) return nullptr;
  // The value is converted on the current thread, not on the waiting
  // coroutine: converting allocates, a collector step may run finalizers
  // (Lua code) on the thread that allocates, and a suspended coroutine must
  // run none. The conversion may also run JS (getters) that cancels the
  // task, resumes it or closes the runtime: all is looked up again after.
  lua_State* L = core->host->current();
  core->Entered([&] {
    Task* again = nullptr;
    {
      LuaHost::HostSection section(core->host.get(), L);
      if (!lua_checkstack(L, 4)) return 0;
      const int top = lua_gettop(L);
      const size_t before = core->MemoryUsed();
      lua_pushboolean(L, ok);
      try {
        if (ok && wait == WaitKind::kCommit) {
          lua_pushnil(L);
        } else if (ok) {
          if (!PushJsForLua(core.get(), L, argv[3])) {  // the await raises the memory error
            lua_pushboolean(L, 0);
            lua_replace(L, -3);  // ok, message -> false, message
          }
        } else {
          PushJsError(core.get(), L, argv[3]);
          if (core->RefuseIfPastLimit(L, top, before)) {
            lua_pushboolean(L, 0);
            lua_insert(L, -2);
          }
        }
      } catch (const Napi::Error& e) {
        // The value cannot cross: the await raises that conversion error.
        lua_settop(L, top);
        lua_pushboolean(L, 0);
        PushJsException(core.get(), L, e);
      }
      again = core->closed() ? nullptr : core->scheduler->Awaiting(key, token);
      if (again == nullptr || again->SettledBy(token) != wait || !lua_checkstack(again->co, 2)) {
        lua_settop(L, top);
        return 0;
      }
      lua_xmove(L, again->co, 2);
    }
    // Outside the host section: with no host code on the stack, an unlock
    // that follows runs the timers that came due during the write.
    if (wait == WaitKind::kCommit) {
      core->scheduler->FinishCommit(again, 2);
    } else {
      core->scheduler->Deliver(again, 2);
    }
    return 0;
  });
  return nullptr;
}

}  // namespace

void RuntimeCore::OnScheduleChange() {
  if (driver) driver->Sync();
  if (!scheduler || owner_ == nullptr || !notify_) return;
  const bool busy = scheduler->HasTimers() || scheduler->HasReady() || scheduler->HasOutsideWaits();
  if (busy != owner_strong_) {
    uint32_t count;
    if (busy) {
      napi_reference_ref(env, owner_, &count);
    } else {
      napi_reference_unref(env, owner_, &count);
    }
    owner_strong_ = busy;
  }
}

namespace {

// Whether Lua code is on the C stack below us: a job begun now could see
// that code change the state after we return, with no entry to stop it. An
// Entry is open, or a function runs on the current thread (a __gc
// finalizer run by an allocation in host code has no Entry).
bool LuaRunning(LuaHost* host) {
  lua_Debug ar;
  return host->depth() > 0 || lua_getstack(host->current(), 0, &ar) != 0;
}

}  // namespace

std::string RuntimeCore::SnapshotError(const StateEncoder& encoder) const {
  if (encoder.failure() == CodecFailure::kTooLarge) {
    return encoder.error() + ": " + LimitAdvice("maxValueBytes", scheduler->persist_limits().value_bytes);
  }
  return encoder.error();
}

bool RuntimeCore::Snapshot(SnapshotBytes* out, std::string* error) {
  lua_State* L = host->current();
  LuaHost::HostSection section(host.get(), L);
  PushTasksState(L);
  StateEncoder encoder(L, -1, "state", scheduler->persist_limits().Encoding(host.get()));
  lua_pop(L, 1);
  if (encoder.Finish() != CodecProgress::kDone) {
    *error = SnapshotError(encoder);
    return false;
  }
  *out = encoder.TakeBytes();
  return true;
}

void RuntimeCore::BeginSnapshot() {
  if (encoder_) {
    ThrowError(Napi::Env(env), "ERR_COMMIT_FAILED",
               "Cannot begin a snapshot: one is in progress (snapshotStep until it returns the bytes, or "
               "snapshotAbort).");
  }
  lua_State* L = host->current();
  {
    LuaHost::HostSection section(host.get(), L);  // a restore in progress finishes here
    PushTasksState(L);
    encoder_ = std::make_unique<StateEncoder>(L, -1, "state", scheduler->persist_limits().Encoding(host.get()));
    lua_pop(L, 1);
    if (LuaRunning(host.get())) encoder_->Finish();
  }
  ArmJobs();
}

bool RuntimeCore::StepSnapshot(int64_t budget_ns, SnapshotBytes* out) {
  if (!encoder_) ThrowError(Napi::Env(env), "ERR_COMMIT_FAILED", "No snapshot is in progress (snapshotBegin first).");
  if (encoder_->progress() == CodecProgress::kMore) {
    host->set_entry_hook(nullptr, nullptr);  // this section is the job's own
    {
      LuaHost::HostSection section(host.get(), host->current());
      encoder_->Step(&clock, budget_ns);
    }
    ArmJobs();
  }
  switch (encoder_->progress()) {
    case CodecProgress::kMore:
      return false;
    case CodecProgress::kDone:
      *out = encoder_->TakeBytes();
      AbortSnapshot();
      return true;
    case CodecProgress::kFailed:
      break;
  }
  const std::string error = SnapshotError(*encoder_);
  const bool too_large = encoder_->failure() == CodecFailure::kTooLarge;
  AbortSnapshot();
  ThrowError(Napi::Env(env), too_large ? "ERR_STORE_LIMIT" : "ERR_COMMIT_FAILED", "COMMIT failed: " + error + ".");
}

void RuntimeCore::AbortSnapshot() {
  if (!encoder_) return;
  encoder_.reset();  // unrefs its thread: no Lua call that can raise
  ArmJobs();
}

void RuntimeCore::BeginRestore(napi_value buffer) {
  if (decoder_ || !restore_error_.empty()) {
    ThrowError(Napi::Env(env), "ERR_COMMIT_FAILED",
               "Cannot begin a restore: one is in progress (restoreStep until it returns true).");
  }
  napi_typedarray_type type;
  size_t length = 0;
  void* data = nullptr;
  napi_value arraybuffer;
  size_t offset;
  Check(env, napi_get_typedarray_info(env, buffer, &type, &length, &data, &arraybuffer, &offset), "read the snapshot");
  Check(env, napi_create_reference(env, buffer, 1, &restore_buffer_), "keep the snapshot");
  restore_data_ = data;
  restore_length_ = length;
  lua_State* L = host->current();
  {
    LuaHost::HostSection section(host.get(), L);  // a snapshot in progress finishes here
    // Under the memory limit: a snapshot that cannot fit fails the open
    // (ERR_MEMORY_LIMIT) and is left as it is, for an open with a larger one.
    decoder_ = std::make_unique<StateDecoder>(
        L, std::string_view(length == 0 ? "" : static_cast<const char*>(data), length), Decoding(host.get()));
    // Unlike the encoder, the decoder does not mind Lua running beside it,
    // but it keeps the collector stopped while it is unfinished.
    if (LuaRunning(host.get())) AdvanceRestore(nullptr, 0);
  }
  ArmJobs();
}

bool RuntimeCore::StepRestore(int64_t budget_ns) {
  if (!decoder_ && restore_error_.empty()) {
    ThrowError(Napi::Env(env), "ERR_COMMIT_FAILED", "No restore is in progress (restoreBegin first).");
  }
  if (decoder_ && decoder_->progress() == CodecProgress::kMore) {
    host->set_entry_hook(nullptr, nullptr);  // this section is the job's own
    {
      LuaHost::HostSection section(host.get(), host->current());
      AdvanceRestore(&clock, budget_ns);
    }
    ArmJobs();
  }
  if (restore_error_.empty() && decoder_->progress() == CodecProgress::kMore) return false;
  if (restore_error_.empty() && decoder_->progress() == CodecProgress::kDone) {
    EndRestore();
    return true;
  }
  const std::string error = restore_error_.empty() ? decoder_->error() : restore_error_;
  const bool no_room = decoder_ && decoder_->failure() == CodecFailure::kNoRoom;
  EndRestore();
  ThrowError(Napi::Env(env), no_room ? "ERR_MEMORY_LIMIT" : "ERR_STORE_CORRUPT", error);
}

void RuntimeCore::EndRestore() {
  decoder_.reset();  // restarts the collector if the job stopped it
  restore_error_.clear();
  if (restore_buffer_ != nullptr) napi_delete_reference(env, restore_buffer_);
  restore_buffer_ = nullptr;
  restore_data_ = nullptr;
  restore_length_ = 0;
  ArmJobs();
}

void RuntimeCore::AdvanceRestore(const Clock* clock_or_null, int64_t budget_ns) {
  if (!RestoreBytesIntact()) {
    restore_error_ = "the snapshot's buffer was detached or resized while it was being restored";
    decoder_.reset();
    return;
  }
  if (decoder_->Step(clock_or_null, budget_ns) != CodecProgress::kDone) return;
  lua_State* L = host->current();  // the caller's HostSection is on it
  const int top = lua_gettop(L);
  if (!lua_checkstack(L, 4)) {
    restore_error_ = "cannot restore the state: not enough memory for the Lua stack";
    decoder_.reset();
    return;
  }
  decoder_->PushResult(L);
  SetTasksState(L, top + 1);
  lua_settop(L, top);
}

bool RuntimeCore::RestoreBytesIntact() {
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return false;
  napi_value buffer = nullptr;
  napi_typedarray_type type;
  size_t length = 0;
  void* data = nullptr;
  napi_value arraybuffer;
  size_t offset;
  const bool ok = napi_get_reference_value(env, restore_buffer_, &buffer) == napi_ok && buffer != nullptr &&
                  napi_get_typedarray_info(env, buffer, &type, &length, &data, &arraybuffer, &offset) == napi_ok &&
                  data == restore_data_ && length == restore_length_;
  napi_close_handle_scope(env, scope);
  return ok;
}

void RuntimeCore::FinishJobs(void* self) {
  auto* core = static_cast<RuntimeCore*>(self);
  LuaHost::HostSection section(core->host.get(), core->host->current());
  if (core->encoder_ && core->encoder_->progress() == CodecProgress::kMore) core->encoder_->Finish();
  if (core->decoder_ && core->decoder_->progress() == CodecProgress::kMore) core->AdvanceRestore(nullptr, 0);
}

void RuntimeCore::ArmJobs() {
  if (!host) return;
  const bool unfinished = (encoder_ && encoder_->progress() == CodecProgress::kMore) ||
                          (decoder_ && decoder_->progress() == CodecProgress::kMore);
  host->set_entry_hook(unfinished ? &RuntimeCore::FinishJobs : nullptr, this);
}

void RuntimeCore::OnCommit(Task& task) {
  // The JS side encodes (snapshotBegin, then snapshotStep a slice per loop
  // turn), saves, and calls settle(key, token, ok, error).
  napi_handle_scope scope;
  napi_open_handle_scope(env, &scope);
  try {
    napi_value argv[5], fn, recv, ignored;
    napi_get_reference_value(env, commit_, &fn);
    napi_get_reference_value(env, owner_, &argv[0]);
    // Whether the committer is durable: a durable task's COMMIT outlives a
    // transient store failure (lib/runtime/commit_queue.js retries it).
    napi_get_boolean(env, task.durable, &argv[1]);
    napi_get_reference_value(env, settle, &argv[2]);
    napi_create_double(env, static_cast<double>(task.key), &argv[3]);
    napi_create_uint32(env, task.NewAwaitToken(), &argv[4]);
    napi_get_undefined(env, &recv);
    if (argv[0] == nullptr || napi_call_function(env, recv, fn, 5, argv, &ignored) != napi_ok) {
      ThrowPending(env, "starting a commit");
    }
  } catch (const Napi::Error& e) {
    // Fail the COMMIT at its yield: (false, error) to k_commit.
    {
      LuaHost::HostSection section(host.get(), host->current());
      lua_pushboolean(task.co, 0);
      PushJsException(this, task.co, e);
    }
    napi_close_handle_scope(env, scope);
    scheduler->FinishCommit(&task, 2);
    return;
  }
  napi_close_handle_scope(env, scope);
}

void RuntimeCore::OnJournal() {
  // The JS side writes the records soon (CommitQueue.flushSoon): commit(owner, -, -, 0, 0).
  if (owner_ == nullptr || closed()) return;
  napi_handle_scope scope;
  napi_open_handle_scope(env, &scope);
  napi_value argv[5], fn, recv, ignored;
  napi_get_reference_value(env, commit_, &fn);
  napi_get_reference_value(env, owner_, &argv[0]);
  napi_get_undefined(env, &argv[1]);
  napi_get_undefined(env, &argv[2]);
  napi_create_uint32(env, 0, &argv[3]);
  napi_create_uint32(env, 0, &argv[4]);
  napi_get_undefined(env, &recv);
  if (argv[0] != nullptr && fn != nullptr) {
    if (napi_call_function(env, recv, fn, 5, argv, &ignored) != napi_ok) {
      napi_value exc;
      napi_get_and_clear_last_exception(env, &exc);  // the records stay queued for the next write
    }
  }
  napi_close_handle_scope(env, scope);
}

void RuntimeCore::SetActivate(napi_value fn) {
  // OnActivate calls it: anything else would end as an uncaught `undefined`.
  napi_valuetype type = napi_undefined;
  if (napi_typeof(env, fn, &type) != napi_ok || type != napi_function) {
    constexpr const char* kNames[] = {"undefined", "null",      "a boolean",  "a number",    "a string",
                                      "a symbol",  "an object", "a function", "an external", "a bigint"};
    const auto at = static_cast<size_t>(type);
    ThrowError(Napi::Env(env), "ERR_INVALID_ARG_TYPE",
               std::string("setActivate() takes a function. Received ") +
                   (at < std::size(kNames) ? kNames[at] : "a value") + ".");
  }
  if (activate_ != nullptr) napi_delete_reference(env, activate_);
  activate_ = nullptr;  // never the deleted reference, should the one below fail
  Check(env, napi_create_reference(env, fn, 1, &activate_), "keeping the activate function");
}

void RuntimeCore::OnActivate(const std::string& id) {
  if (!notify_ || activate_ == nullptr || owner_ == nullptr || closed()) return;
  napi_handle_scope scope;
  napi_open_handle_scope(env, &scope);
  napi_value argv[2], fn, recv, ignored;
  napi_get_reference_value(env, activate_, &fn);
  napi_get_reference_value(env, owner_, &argv[0]);
  napi_create_string_utf8(env, id.data(), id.size(), &argv[1]);
  napi_get_undefined(env, &recv);
  if (argv[0] != nullptr && fn != nullptr && napi_call_function(env, recv, fn, 2, argv, &ignored) != napi_ok) {
    // The JS side reports an activation's failure itself: this is a bug there, uncaught.
    napi_value exc;
    napi_get_and_clear_last_exception(env, &exc);
    napi_fatal_exception(env, exc);
  }
  napi_close_handle_scope(env, scope);
}

void RuntimeCore::Attach(napi_value listener, napi_value owner, napi_value commit) {
  // Every status is checked: a Runtime made while its Worker is being
  // terminated (Lua code spinning on resource calls that open runtimes) gets
  // no new function, and an unset value must never reach the next call.
  constexpr const char* what = "creating the runtime";
  // `this` of the JS functions Lua calls, a reference of the runtime's own: a
  // second init (the addon's module evaluated again, as Jest does per test
  // file) replaces AddonData's and deletes the one it had.
  const Napi::ObjectReference& shared_receiver = AddonData::From(env)->receiver;
  if (shared_receiver.IsEmpty()) {
    ThrowError(Napi::Env(env), "ERR_INVALID_STATE", "The addon is not initialised: load it through lib/binding.js.");
  }
  Check(env, napi_create_reference(env, shared_receiver.Value(), 1, &receiver), what);
  Check(env, napi_create_reference(env, owner, 0, &owner_), what);
  Check(env, napi_create_reference(env, commit, 1, &commit_), what);
  {
    auto data = std::make_unique<SettleData>(SettleData{weak_from_this()});
    napi_value fn;
    Check(env, napi_create_function(env, "settle", NAPI_AUTO_LENGTH, Settle, data.get(), &fn), what);
    Check(env,
          napi_add_finalizer(
              env, fn, data.get(),
              [](napi_env, void* d, void*) { std::unique_ptr<SettleData> owned(static_cast<SettleData*>(d)); }, nullptr,
              nullptr),
          what);
    data.release();  // owned by the function now
    Check(env, napi_create_reference(env, fn, 1, &settle), what);
  }
  Check(env, napi_create_reference(env, listener, 1, &listener_), what);
  napi_value resource, name;
  Check(env, napi_create_object(env, &resource), what);
  Check(env, napi_create_reference(env, resource, 1, &resource_), what);
  Check(env, napi_create_string_utf8(env, "lua-tasks", NAPI_AUTO_LENGTH, &name), what);
  Check(env, napi_async_init(env, resource, name, &async_), what);
  napi_value poll;
  Check(env,
        napi_create_function(
            env, "poll", NAPI_AUTO_LENGTH, [](napi_env, napi_callback_info) -> napi_value { return nullptr; }, nullptr,
            &poll),
        what);
  Check(env, napi_create_reference(env, poll, 1, &poll_fn_), what);
  host->set_interrupt_poll(&RuntimeCore::PollTerminating, this);
  // Calls out of Lua share a handle scope per entry (js_ref.cpp), which the entry closes.
  host->set_call_scope_closer([](void* core, void* scope) { CloseCallScope(static_cast<RuntimeCore*>(core), scope); },
                              this);
  uv_loop_t* loop = nullptr;
  napi_get_uv_event_loop(env, &loop);
  driver = std::make_unique<UvDriver>(loop, scheduler.get(), [this](void (*step)(Scheduler*)) { RunFromLoop(step); });
  // The async hook, not napi_add_env_cleanup_hook: the sync one crashes
  // Workers on exit when it touches handles (docs/design.md#build).
  napi_add_async_cleanup_hook(env, OnCleanup, this, &cleanup_hook_);
}

// The InterruptWatch's question: may Lua go on? Node-API refuses to call JS
// once the environment is being torn down (worker.terminate(), process.exit()
// stopping Workers, the end of a Worker), so a failed call of a function that
// cannot throw means exactly that. An exception pending before the call
// (host code between two steps) says nothing: ask again at the next round.
bool RuntimeCore::PollTerminating(void* ctx) {
  napi_env env = static_cast<RuntimeCore*>(ctx)->env;
  bool pending = false;
  if (napi_is_exception_pending(env, &pending) != napi_ok || pending) return false;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return true;
  napi_value fn, recv, out;
  napi_get_undefined(env, &recv);
  napi_status st = napi_get_reference_value(env, static_cast<RuntimeCore*>(ctx)->poll_fn_, &fn);
  if (st == napi_ok) st = napi_call_function(env, recv, fn, 0, nullptr, &out);
  if (st != napi_ok) {
    napi_value ignored;
    napi_get_and_clear_last_exception(env, &ignored);
  }
  napi_close_handle_scope(env, scope);
  return st != napi_ok;
}

void RuntimeCore::RunFromLoop(void (*step)(Scheduler*)) {
  if (closed() || !scheduler || host->terminating()) return;
  napi_handle_scope scope;
  napi_open_handle_scope(env, &scope);
  // The async context's own resource object, held for the runtime's life:
  // Node-API keeps it only weakly (once collected, AsyncLocalStorage context
  // entered in the Runtime's creation was lost), and uses it whatever object
  // is passed here; a new one per loop turn was a JS allocation per turn.
  napi_value resource;
  napi_get_reference_value(env, resource_, &resource);
  napi_callback_scope cb_scope = nullptr;
  // Closing the callback scope runs microtasks: promise reactions to the
  // tasks that ended in this step run right after it, as after any callback.
  napi_open_callback_scope(env, resource, async_, &cb_scope);
  try {
    step(scheduler.get());
  } catch (const Napi::Error& e) {
    napi_fatal_exception(env, e.Value());
  } catch (const std::exception& e) {
    napi_value msg, err;
    napi_create_string_utf8(env, e.what(), NAPI_AUTO_LENGTH, &msg);
    napi_create_error(env, nullptr, msg, &err);
    napi_fatal_exception(env, err);
  }
  AfterEntry();
  if (cb_scope != nullptr) napi_close_callback_scope(env, cb_scope);
  napi_close_handle_scope(env, scope);
}

napi_value RuntimeCore::EndValue(const Task& task, lua_State* co, const TaskEnding& end, EndKind* kind) {
  *kind = EndKindOf(end.kind);
  const TaskTrace* trace = end.trace;
  if (end.kind == TaskEnd::kTimedOut) {
    const int64_t ms = host->budget() != nullptr ? host->budget()->timeout_ns() / 1000000 : 0;
    return MakeError(Napi::Env(env), "ERR_TASK_TIMEOUT",
                     "Task " + scheduler->IdOf(task.key) + " exceeded its CPU budget (taskTimeout " +
                         std::to_string(ms) + " ms) and was killed.",
                     WhereProps(Napi::Env(env), trace));
  }
  if (*kind == EndKind::kDone && end.nres > 0) {
    try {
      return ToJs(this, co, -end.nres);
    } catch (const Napi::Error& e) {
      *kind = EndKind::kFailed;  // the result cannot cross: the task fails with that error
      scheduler->MarkHostFailed(task.key);
      return e.Value();
    }
  }
  if (*kind == EndKind::kFailed) return LuaErrorToJs(this, co, end.lua_status, trace);
  napi_value undefined;
  napi_get_undefined(env, &undefined);
  return undefined;
}

void RuntimeCore::OnTaskEnd(Task& task, lua_State* co, const TaskEnding& end) {
  if (!notify_ || listener_ == nullptr) return;
  // Inside rt.start's own call, whose handle scope holds the values: a scope
  // of its own was a heap allocation per start.
  const bool direct = task.key == direct_key_ && direct_out_ != nullptr;
  napi_handle_scope scope = nullptr;
  if (!direct) napi_open_handle_scope(env, &scope);
  try {
    EndKind kind;
    napi_value value = EndValue(task, co, end, &kind);
    if (direct) {
      napi_valuetype type;
      napi_typeof(env, value, &type);
      if (type != napi_undefined) napi_set_element(env, direct_out_, 0, value);
      direct_kind_ = kind;
      direct_key_ = 0;
    } else {
      napi_value args[4], fn, recv, ignored;
      napi_get_reference_value(env, owner_, &args[0]);
      if (args[0] != nullptr) {  // else the Runtime was collected: nobody can hear it
        napi_create_double(env, static_cast<double>(task.key), &args[1]);
        napi_create_int32(env, static_cast<int32_t>(kind), &args[2]);
        args[3] = value;
        napi_get_reference_value(env, listener_, &fn);
        napi_get_undefined(env, &recv);
        if (napi_call_function(env, recv, fn, 4, args, &ignored) != napi_ok) {
          napi_value exc;
          napi_get_and_clear_last_exception(env, &exc);
          napi_fatal_exception(env, exc);  // a throwing 'taskdone' listener: uncaught, as in any emit
        }
      }
    }
  } catch (const Napi::Error& e) {
    napi_fatal_exception(env, e.Value());
  } catch (const std::exception&) {
  }
  if (scope != nullptr) napi_close_handle_scope(env, scope);
}

void RuntimeCore::OnCallbackError(napi_value error) {
  napi_value owner = nullptr, fn = nullptr, recv, ignored;
  napi_get_undefined(env, &recv);
  if (notify_ && listener_ != nullptr && owner_ != nullptr) {
    napi_get_reference_value(env, owner_, &owner);
    napi_get_reference_value(env, listener_, &fn);
  }
  if (owner != nullptr && fn != nullptr) {
    napi_value args[4];
    args[0] = owner;
    napi_create_double(env, 0, &args[1]);
    napi_create_int32(env, static_cast<int32_t>(EndKind::kCallbackFailed), &args[2]);
    args[3] = error;
    napi_call_function(env, recv, fn, 4, args, &ignored);
    return;
  }
  // The Runtime was collected or closed during the call: never dropped.
  napi_call_function(env, recv, AddonData::From(env)->warn_unheard.Value(), 1, &error, &ignored);
}

void RuntimeCore::OnCleanup(napi_async_cleanup_hook_handle handle, void* arg) {
  auto* core = static_cast<RuntimeCore*>(arg);
  core->cleanup_hook_ = handle;
  core->CloseNow(false, false);
}

void RuntimeCore::CheckMemory(lua_State* L, int base, size_t before) {
  const size_t would = host->memory().used;
  if (!RefuseIfPastLimit(L, base, before)) return;
  lua_settop(L, base);  // the Lua message: JS gets its own
  ThrowError(Napi::Env(env), "ERR_MEMORY_LIMIT",
             "The value given is too large for this runtime: the Lua state would hold " + std::to_string(would) +
                 " bytes, past memoryLimit " + std::to_string(host->memory().limit) + ".");
}

bool RuntimeCore::RefuseIfPastLimit(lua_State* L, int base, size_t before) {
  if (!PastLimit(before)) return false;
  const lua_Integer would = static_cast<lua_Integer>(host->memory().used);
  lua_settop(L, base);
  lua_gc(host->main(), LUA_GCCOLLECT);  // the dropped values are garbage now
  lua_pushfstring(L, "not enough memory: the JS value would take the Lua state to %I bytes, past memoryLimit %I", would,
                  static_cast<lua_Integer>(host->memory().limit));
  return true;
}

void RuntimeCore::ReportMemory() {
  const int64_t used = static_cast<int64_t>(host->memory().used);
  const int64_t delta = used - reported_;
  if (delta > (int64_t{256} << 10) || delta < -(int64_t{256} << 10)) {
    int64_t ignored;
    napi_adjust_external_memory(env, delta, &ignored);
    reported_ = used;
  }
}

void RuntimeCore::Close() {
  closing_ = true;
  if (host && host->busy()) return;  // AfterEntry finishes it
  CloseNow(true, true);
}

void RuntimeCore::CloseNow(bool notify, bool release) {
  closing_ = true;
  notify_ = notify;
  // Dropped, not finished: the cancellations below enter the state. They
  // hold registry refs, so before the state goes too.
  encoder_.reset();
  decoder_.reset();
  restore_error_.clear();
  if (restore_buffer_ != nullptr && release) napi_delete_reference(env, restore_buffer_);
  restore_buffer_ = nullptr;
  if (host) host->set_entry_hook(nullptr, nullptr);
  if (scheduler) scheduler->CancelAll();  // runs <close> variables; observed tasks reject
  Free();                                 // lua_close runs __gc of JS references, which need env alive
  // The only kind of reader the addon sets; during teardown its ref is not ours to delete.
  if (!release && keyed.reader() != nullptr) static_cast<JsStoreReader*>(keyed.reader())->Abandon();
  keyed.set_reader(nullptr);
  contexts.Clear();
  if (reported_ != 0 && release) {
    int64_t ignored;
    napi_adjust_external_memory(env, -reported_, &ignored);
  }
  reported_ = 0;
  if (release) {
    if (listener_ != nullptr) napi_delete_reference(env, listener_);
    if (settle != nullptr) napi_delete_reference(env, settle);
    if (owner_ != nullptr) napi_delete_reference(env, owner_);
    if (commit_ != nullptr) napi_delete_reference(env, commit_);
    if (activate_ != nullptr) napi_delete_reference(env, activate_);
    if (resource_ != nullptr) napi_delete_reference(env, resource_);
    if (poll_fn_ != nullptr) napi_delete_reference(env, poll_fn_);
    if (receiver != nullptr) napi_delete_reference(env, receiver);
  }
  receiver = nullptr;
  resource_ = nullptr;
  poll_fn_ = nullptr;
  listener_ = nullptr;
  owner_ = nullptr;
  commit_ = nullptr;
  activate_ = nullptr;
  settle = nullptr;
  if (async_ != nullptr && release) napi_async_destroy(env, async_);
  async_ = nullptr;
  napi_async_cleanup_hook_handle hook = cleanup_hook_;
  cleanup_hook_ = nullptr;
  if (driver) {
    // The hook is removed only once libuv has closed the handles, so a
    // Worker's loop does not end under them.
    driver->Close([hook] {
      if (hook != nullptr) napi_remove_async_cleanup_hook(hook);
    });
    driver.reset();
  } else if (hook != nullptr) {
    napi_remove_async_cleanup_hook(hook);
  }
}

}  // namespace lua_tasks
