// SPDX-License-Identifier: MIT
// Runtime's persistence: snapshot and restore of tasks.state, at once or in slices, and the snapshot lock.
#include "addon/runtime/runtime.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "addon/errors.hpp"
#include "addon/runtime/task_codes.hpp"
#include "addon/store/journal_batch.hpp"
#include "addon/store/native_store.hpp"
#include "addon/store/store_reader.hpp"
#include "addon/values/convert.hpp"
#include "addon/values/owned_buffer.hpp"
#include "core/codec/state_codec.hpp"
#include "core/durable/durable_record.hpp"
#include "core/durable/index_restore.hpp"
#include "core/durable/replayer.hpp"
#include "core/store/persist_limits.hpp"
#include "core/store/tasks_state.hpp"

namespace lua_tasks {

namespace {

// Below this a snapshot is copied into a Buffer of V8's: an external one
// costs a finalizer and a weak global handle, more than the copy (a durable
// task's COMMIT takes the usual small tasks.state snapshot every time).
constexpr size_t kCopySnapshotBelow = 16 * 1024;

// A Buffer over the snapshot's own block, freed with it: no copy of
// megabytes on the loop. A copy for a small one, and where external buffers
// are refused (a V8 sandbox).
Napi::Value SnapshotBuffer(Napi::Env env, SnapshotBytes bytes) {
  if (bytes.size() < kCopySnapshotBelow) return Napi::Buffer<char>::Copy(env, bytes.data(), bytes.size());
  return OwnedBuffer(env, std::move(bytes));
}

// A step's budget from JS milliseconds; anything else is the smallest slice.
int64_t BudgetNs(const Napi::Value& ms) {
  if (!ms.IsNumber()) return 0;
  const double ns = ms.As<Napi::Number>().DoubleValue() * 1e6;
  return ns > 0 ? static_cast<int64_t>(std::min(ns, 1e15)) : 0;
}

}  // namespace

#ifdef LUA_TASKS_TEST_HOOKS
// The whole of tasks.state at once, out and in: for the tests and the bench
// (a runtime snapshots in slices, between loop turns).
Napi::Value Runtime::JS_snapshot(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  SnapshotBytes bytes;
  std::string error;
  if (!core->Snapshot(&bytes, &error)) ThrowError(env, "ERR_COMMIT_FAILED", "commit() failed: " + error + ".");
  return SnapshotBuffer(env, std::move(bytes));
}

Napi::Value Runtime::JS_restore(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  Napi::Uint8Array bytes = info[0].As<Napi::Uint8Array>();
  lua_State* L = core->host->current();
  LuaHost::HostSection section(core->host.get(), L);
  const int base = lua_gettop(L);
  std::string error;
  CodecFailure failure;
  if (!DecodeState(L, std::string_view(reinterpret_cast<const char*>(bytes.Data()), bytes.ByteLength()), &error,
                   &failure, Decoding(core->host.get()))) {
    ThrowError(env, failure == CodecFailure::kNoRoom ? "ERR_MEMORY_LIMIT" : "ERR_STORE_CORRUPT", error);
  }
  SetTasksState(L, base + 1);
  lua_settop(L, base);
  return env.Undefined();
}
#endif

Napi::Value Runtime::JS_snapshotBegin(const Napi::CallbackInfo& info) {
  RuntimeCore* core = OpenCore(info.Env());
  core->Entered([&] {
    core->BeginSnapshot();
    return 0;
  });
  return info.Env().Undefined();
}

Napi::Value Runtime::JS_snapshotStep(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  const int64_t budget = BudgetNs(info[0]);
  SnapshotBytes bytes;
  if (!core->Entered([&] { return core->StepSnapshot(budget, &bytes); })) return env.Undefined();
  return SnapshotBuffer(env, std::move(bytes));
}

Napi::Value Runtime::JS_snapshotAbort(const Napi::CallbackInfo& info) {
  if (!core_->closed()) core_->AbortSnapshot();
  return info.Env().Undefined();
}

Napi::Value Runtime::JS_restoreBegin(const Napi::CallbackInfo& info) {
  RuntimeCore* core = OpenCore(info.Env());
  core->Entered([&] {
    core->BeginRestore(info[0]);
    return 0;
  });
  return info.Env().Undefined();
}

Napi::Value Runtime::JS_restoreStep(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  const int64_t budget = BudgetNs(info[0]);
  return Napi::Boolean::New(env, core->Entered([&] { return core->StepRestore(budget); }));
}

namespace {

// The writes of a batch that failed, as takeWrites/takeJournal gave them.
template <typename Write = KeyedWrite>
std::vector<Write> WritesOf(const Napi::Array& batch) {
  std::vector<Write> writes;
  writes.reserve(batch.Length());
  for (uint32_t i = 0; i < batch.Length(); ++i) {
    Napi::Object record = batch.Get(i).As<Napi::Object>();
    Write w;
    if constexpr (std::is_same_v<Write, StoreWrite>) w.space = record.Get("space").ToNumber().Int32Value();
    w.key = record.Get("key").As<Napi::String>().Utf8Value();
    Napi::Value value = record.Get("value");
    if (value.IsTypedArray()) {
      auto bytes = value.As<Napi::Uint8Array>();
      w.value.emplace(reinterpret_cast<const char*>(bytes.Data()), bytes.ByteLength());
    }
    writes.push_back(std::move(w));
  }
  return writes;
}

}  // namespace

Napi::Value Runtime::JS_setStoreReader(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  if (info[0].IsObject()) {
    core->keyed.set_reader(std::make_unique<JsStoreReader>(env, info[0]));
  } else {
    core->keyed.set_reader(nullptr);
  }
  return env.Undefined();
}

Napi::Value Runtime::JS_takeWrites(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  if (core->keyed.in_flight())
    ThrowError(env, "ERR_COMMIT_FAILED", "A batch of tasks.store writes is in flight already.");
  const std::vector<KeyedWrite> writes = core->keyed.Take();
  if (writes.empty()) return env.Null();
  // Packed: [keys, bytes, ends], the values one after another in one Buffer,
  // ends[i] the end of value i in it or -1 for a delete. An object and a
  // Buffer a write, made through Node-API, cost the loop ~2 µs each; the JS
  // side (lib/runtime/commit_queue.js) makes the records and slices faster.
  size_t total = 0;
  for (const KeyedWrite& w : writes) total += w.value ? w.value->size() : 0;
  Napi::Array keys = Napi::Array::New(env, writes.size());
  Napi::Buffer<char> bytes = Napi::Buffer<char>::New(env, total);
  Napi::Float64Array ends = Napi::Float64Array::New(env, writes.size());
  size_t at = 0;
  for (size_t i = 0; i < writes.size(); ++i) {
    const KeyedWrite& w = writes[i];
    keys.Set(static_cast<uint32_t>(i), Napi::String::New(env, w.key));
    if (w.value) {
      std::copy(w.value->begin(), w.value->end(), bytes.Data() + at);
      at += w.value->size();
      ends[i] = static_cast<double>(at);
    } else {
      ends[i] = -1;
    }
  }
  Napi::Array out = Napi::Array::New(env, 3);
  out.Set(0u, keys);
  out.Set(1u, bytes);
  out.Set(2u, ends);
  return out;
}

Napi::Value Runtime::JS_confirmWrites(const Napi::CallbackInfo& info) {
  if (!core_->closed()) core_->keyed.Confirm();
  return info.Env().Undefined();
}

Napi::Value Runtime::JS_putBackWrites(const Napi::CallbackInfo& info) {
  if (core_->closed() || !info[0].IsArray()) return info.Env().Undefined();
  core_->keyed.PutBack(WritesOf(info[0].As<Napi::Array>()));
  return info.Env().Undefined();
}

Napi::Value Runtime::JS_takeJournal(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  Replayer* durable = core->scheduler->replayer();
  if (durable == nullptr) return env.Null();
  std::vector<StoreWrite> writes = durable->TakeWrites();
  if (writes.empty()) return env.Null();
  return WrapJournal(env, std::move(writes));
}

Napi::Value Runtime::JS_journalRecords(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const SharedWrites writes = UnwrapJournal(info[0]);
  if (!writes) ThrowError(env, "ERR_INVALID_ARG_TYPE", "journalRecords takes what takeJournal gave.");
  return JournalRecords(env, *writes);
}

Napi::Value Runtime::JS_journalBytes(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const SharedWrites writes = UnwrapJournal(info[0]);
  return Napi::Number::New(env, writes ? static_cast<double>(JournalBytes(*writes)) : 0.0);
}

Napi::Value Runtime::JS_restoreScan(const Napi::CallbackInfo& info) {
  // (store, name): a directory store's records of `name`, read natively in
  // one pass. False when `store` is not a NativeStore (the JS side then
  // feeds pages of its reader with restoreFeed).
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  NativeStore* store = NativeStore::From(info[0]);
  if (store == nullptr) return Napi::Boolean::New(env, false);
  if (!core->restoring) core->restoring = std::make_unique<JournalRestore>();
  store->ScanDurable(env, info[1].As<Napi::String>().Utf8Value(), core->restoring.get());
  return Napi::Boolean::New(env, true);
}

namespace {

// Each (key, record) of a page a JS store gave (keys[], records[]), its
// record's bytes not copied; a listed key without bytes is damage.
template <typename Visit>
void ForEachRecord(Napi::Env env, Napi::Value keys_value, Napi::Value records_value, Visit visit) {
  Napi::Array keys = keys_value.As<Napi::Array>();
  Napi::Array records = records_value.As<Napi::Array>();
  for (uint32_t i = 0; i < keys.Length(); ++i) {
    Napi::Value v = records.Get(i);
    if (!v.IsTypedArray()) {
      ThrowError(env, "ERR_STORE_CORRUPT",
                 "The store has no value for the listed record " + keys.Get(i).ToString().Utf8Value() +
                     " (a page's values must be Buffers, one a key).");
    }
    auto b = v.As<Napi::Uint8Array>();
    visit(keys.Get(i).As<Napi::String>().Utf8Value(),
          std::string_view(reinterpret_cast<const char*>(b.Data()), b.ByteLength()));
  }
}

}  // namespace

Napi::Value Runtime::JS_restoreFeed(const Napi::CallbackInfo& info) {
  // (space, keys[], records[]): a page of a JS store's reader, in key order.
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  if (!core->restoring) core->restoring = std::make_unique<JournalRestore>();
  const int space = info[0].As<Napi::Number>().Int32Value();
  ForEachRecord(env, info[1], info[2],
                [&](const std::string& key, std::string_view value) { core->restoring->Add(space, key, value); });
  return env.Undefined();
}

namespace {

// What a durable task's first record says (JS_restoreTasks): a start record
// [id, entry, key | null]; an end record (a finished task, retained) [id,
// null, key | null, status, ended (ms since the epoch), result or error
// message]; either with its label, if it has one, at [6]; a record that
// does not read [id, false, why].
Napi::Value DescribeTask(RuntimeCore* core, lua_State* L, const std::string& id, const std::string& first) {
  Napi::Env env(core->env);
  Napi::Array out = Napi::Array::New(env);
  out.Set(0u, Napi::String::New(env, id));
  const auto fail = [&](const std::string& why) {
    out.Set(1u, Napi::Boolean::New(env, false));
    out.Set(2u, Napi::String::New(env, why));
    return out;
  };
  std::string sealed = first;
  RecordKind kind;
  std::string_view payload;
  if (!OpenRecord(&sealed, &kind, &payload)) return fail("its first record is damaged (its checksum does not match)");
  std::string error;
  StackGuard stack(L);
  LuaHost::HostSection section(core->host.get(), L);
  const int n = PushFirstRecord(L, kind, payload, &error);
  if (n == 0) return fail("its first record is neither its start nor its end");
  if (n < 0) return fail("its first record does not read" + (error.empty() ? std::string() : ": " + error));
  const int top = lua_gettop(L) - n + 1;
  const int label = top + n - 1;  // the last value, either way
  if (lua_type(L, label) == LUA_TSTRING) out.Set(6u, Napi::String::New(env, lua_tostring(L, label)));
  if (kind == RecordKind::kStart) {  // entry, key or nil
    out.Set(1u, Napi::String::New(env, lua_tostring(L, top)));
    out.Set(2u, lua_isnil(L, top + 1) ? env.Null() : Napi::Value(Napi::String::New(env, lua_tostring(L, top + 1))));
    return out;
  }
  out.Set(1u, env.Null());  // then key, status, ended, result
  // A join of it answers from its end record (forgotten with it past its retention).
  core->scheduler->EnsureReplayer().KeepEnd(id, std::string(payload));
  for (int i = 0; i < 4; ++i) out.Set(static_cast<uint32_t>(i + 2), Napi::Value(env, ToJs(core, L, top + i)));
  return out;
}

}  // namespace

Napi::Value Runtime::JS_restoreTasks(const Napi::CallbackInfo& info) {
  // () -> one description a task that has a journal, in key order.
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  Napi::Array out = Napi::Array::New(env);
  if (!core->restoring) return out;
  lua_State* L = core->host->current();
  uint32_t i = 0;
  for (const std::string& id : core->restoring->ids()) {
    const std::string* first = core->restoring->First(id);
    if (first != nullptr) out.Set(i++, DescribeTask(core, L, id, *first));
  }
  return out;
}

namespace {

// What an index read gave, for lib: [dormant, [id, key, ...], [missing id,
// why, ...]]; the dormant tasks' deadlines are the driver's from now on.
Napi::Value IndexRestored(RuntimeCore* core, Napi::Env env, const IndexRestore& r) {
  Napi::Array keys = Napi::Array::New(env, 2 * r.keys.size());
  uint32_t i = 0;
  for (const auto& [id, key] : r.keys) {
    keys.Set(i++, Napi::String::New(env, id));
    keys.Set(i++, Napi::String::New(env, key));
  }
  Napi::Array missing = Napi::Array::New(env, r.missing.size() * 2);
  for (i = 0; i < r.missing.size(); ++i) {
    missing.Set(2 * i, Napi::String::New(env, r.missing[i].id));
    missing.Set(2 * i + 1, Napi::String::New(env, r.missing[i].why));
  }
  Napi::Array out = Napi::Array::New(env, 3);
  out.Set(0u, Napi::Number::New(env, static_cast<double>(r.dormant)));
  out.Set(1u, keys);
  out.Set(2u, missing);
  core->OnScheduleChange();  // the dormant tasks' deadlines
  return out;
}

}  // namespace

Napi::Value Runtime::JS_restoreIndex(const Napi::CallbackInfo& info) {
  // (store, name) -> false when `store` is not a NativeStore or the name
  // has no complete index (the caller reads every journal); else [dormant,
  // [id, key, ...], [missing id, why, ...]]: how many tasks stay dormant,
  // the idempotency keys of those that have one, and the tasks whose
  // journal the store lacks, with what was wrong. The tasks that run now
  // are in restoring.
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  NativeStore* store = NativeStore::From(info[0]);
  if (store == nullptr) return Napi::Boolean::New(env, false);
  const std::string name = info[1].As<Napi::String>().Utf8Value();
  if (!core->restoring) core->restoring = std::make_unique<JournalRestore>();
  Scheduler* s = core->scheduler.get();
  IndexRestore r;
  store->Read(env, [&](StoreDb& db) {
    r = RestoreFromIndex(db, name, s->id_prefix(), s->clock()->WallNs(), core->restoring.get(),
                         &s->EnsureReplayer().dormant());
  });
  if (!r.complete) return Napi::Boolean::New(env, false);
  return IndexRestored(core, env, r);
}

namespace {

// A description of task `id` from the restore set (JS_restoreTasks's), or
// that of a record that does not read when its journal is not there.
Napi::Value DescribeRestored(RuntimeCore* core, Napi::Env env, const std::string& id) {
  if (const std::string* first = core->restoring ? core->restoring->First(id) : nullptr) {
    return DescribeTask(core, core->host->current(), id, *first);
  }
  Napi::Array lost = Napi::Array::New(env, 3);
  lost.Set(0u, Napi::String::New(env, id));
  lost.Set(1u, Napi::Boolean::New(env, false));
  lost.Set(2u, Napi::String::New(env, "its index entry names a journal the store does not hold"));
  return lost;
}

// Index and inbox records fed from a JS store's pages, as RestoreFromIndex
// reads them from a StoreDb: every inbox record, then every entry.
IndexReader& IndexReading(RuntimeCore* core) {
  if (!core->restoring) core->restoring = std::make_unique<JournalRestore>();
  if (!core->index_reading) {
    Scheduler* s = core->scheduler.get();
    core->index_reading = std::make_unique<IndexReader>(s->id_prefix(), s->clock()->WallNs(), core->restoring.get(),
                                                        &s->EnsureReplayer().dormant());
  }
  return *core->index_reading;
}

}  // namespace

Napi::Value Runtime::JS_indexMark(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsTypedArray()) return env.Null();
  auto b = info[0].As<Napi::Uint8Array>();
  RecordKind kind;
  std::string_view payload;
  if (!OpenRecordView(std::string_view(reinterpret_cast<const char*>(b.Data()), b.ByteLength()), &kind, &payload) ||
      kind != RecordKind::kIndex) {
    return env.Null();
  }
  return Napi::String::New(env, payload.data(), payload.size());
}

Napi::Value Runtime::JS_indexFeed(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  IndexReader& reader = IndexReading(core);
  const int space = info[0].As<Napi::Number>().Int32Value();
  ForEachRecord(env, info[1], info[2], [&](const std::string& key, std::string_view value) {
    if (space == kInboxSpace) {
      reader.Inbox(key, value);
    } else {
      reader.Entry(key, value);
    }
  });
  return env.Undefined();
}

// A space streamed as PostgreSQL's binary COPY of (key, value) rows in key
// order (PostgresStore.copySpace): the rows reach the reader with no JS
// value a row. null ends the space; data that does not read, or ends
// early, is damage.
Napi::Value Runtime::JS_indexFeedCopy(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  IndexReader& reader = IndexReading(core);
  const int space = info[0].As<Napi::Number>().Int32Value();
  if (!core->index_copy) core->index_copy = std::make_unique<PgCopyRows>();
  PgCopyRows& copy = *core->index_copy;
  bool ok;
  if (info[1].IsNull()) {
    ok = copy.Finish();
  } else {
    auto b = info[1].As<Napi::Uint8Array>();
    ok = copy.Feed(std::string_view(reinterpret_cast<const char*>(b.Data()), b.ByteLength()),
                   [&](std::string_view key, std::string_view value) {
                     if (space == kInboxSpace) {
                       reader.Inbox(key, value);
                     } else {
                       reader.Entry(key, value);
                     }
                   });
  }
  if (!ok || info[1].IsNull()) {
    const std::string why = copy.error();
    core->index_copy.reset();
    if (!ok)
      ThrowError(env, "ERR_STORE_CORRUPT",
                 "Cannot read space " + std::to_string(space) + " of the store: " + why + ".");
  }
  return env.Undefined();
}

Napi::Value Runtime::JS_indexNow(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  const std::vector<std::string>& now = IndexReading(core).now();
  Napi::Array out = Napi::Array::New(env, now.size());
  for (uint32_t i = 0; i < now.size(); ++i) out.Set(i, Napi::String::New(env, now[i]));
  return out;
}

Napi::Value Runtime::JS_indexFinish(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  IndexRestore r = IndexReading(core).Finish();
  core->index_reading.reset();
  core->index_copy.reset();
  return IndexRestored(core, env, r);
}

Napi::Value Runtime::JS_restoreDescribe(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  Napi::Array out = Napi::Array::New(env, 1);
  out.Set(0u, DescribeRestored(core, env, info[0].As<Napi::String>().Utf8Value()));
  return out;
}

Napi::Value Runtime::JS_activate(const Napi::CallbackInfo& info) {
  // (id) -> whether the dormant task `id` is being read now (async reads):
  // an idempotency key named it.
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  Replayer* durable = core->scheduler->replayer();
  return Napi::Boolean::New(env, durable != nullptr && durable->Activating(info[0].As<Napi::String>().Utf8Value()));
}

Napi::Value Runtime::JS_activated(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  if (Replayer* durable = core->scheduler->replayer()) durable->Activated(info[0].As<Napi::String>().Utf8Value());
  return env.Undefined();
}

Napi::Value Runtime::JS_restoreOne(const Napi::CallbackInfo& info) {
  // (store, name, id) -> [description] of the dormant task `id`, its
  // records read into restoring (see JS_restoreTasks; [id, false, why]
  // without a journal), or [] if it is not dormant. It is no longer dormant
  // either way.
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  NativeStore* store = NativeStore::From(info[0]);
  const std::string name = info[1].As<Napi::String>().Utf8Value();
  const std::string id = info[2].As<Napi::String>().Utf8Value();
  Napi::Array out = Napi::Array::New(env);
  Replayer* durable = core->scheduler->replayer();
  if (store == nullptr || durable == nullptr || !durable->dormant().Take(id)) return out;
  if (!core->restoring) core->restoring = std::make_unique<JournalRestore>();
  store->Read(env, [&](StoreDb& db) { RestoreTask(db, name, id, true, core->restoring.get()); });
  out.Set(0u, DescribeRestored(core, env, id));
  return out;
}

Napi::Value Runtime::JS_writeIndex(const Napi::CallbackInfo& info) {
  // (retained ids): every unfinished durable task's index entry, the
  // retained finished ones' end records moved from record 0 into the index,
  // then the index's mark (a name written without an index).
  // (null): the mark only (an open that found the index complete).
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  if (info[0].IsNull()) {
    core->scheduler->EnsureReplayer().WriteIndexMark();
    return env.Undefined();
  }
  std::vector<std::pair<std::string, std::string>> ended;
  if (core->restoring && info[0].IsArray()) {
    Napi::Array ids = info[0].As<Napi::Array>();
    for (uint32_t i = 0; i < ids.Length(); ++i) {
      std::string id = ids.Get(i).As<Napi::String>().Utf8Value();
      if (const std::string* first = core->restoring->First(id)) ended.emplace_back(std::move(id), *first);
    }
  }
  core->scheduler->EnsureReplayer().WriteIndex(ended);
  return env.Undefined();
}

Napi::Value Runtime::JS_dormantTasks(const Napi::CallbackInfo& info) {
  // () -> [id, state, until | undefined, ...] per dormant task, by id (the
  // order of their starts within one run).
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  std::vector<std::pair<std::string, DormantTasks::Entry>> list;
  if (const Replayer* durable = core->scheduler->replayer()) {
    durable->dormant().ForEach([&](std::string_view id, const DormantTasks::Entry& e) { list.emplace_back(id, e); });
    durable->activations().ForEach(
        [&](std::string_view id, const DormantTasks::Entry& e) { list.emplace_back(id, e); });
  }
  std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  Napi::Array out = Napi::Array::New(env, 3 * list.size());
  uint32_t i = 0;
  for (const auto& [id, e] : list) {
    out.Set(i++, Napi::String::New(env, id));
    out.Set(i++, PackState(TaskStatus::kWaiting, e.kind));
    out.Set(i++, e.wall_deadline != 0
                     ? Napi::Value(Napi::Number::New(env, static_cast<double>(e.wall_deadline / 1000000)))
                     : env.Undefined());
  }
  return out;
}

Napi::Value Runtime::JS_setActivate(const Napi::CallbackInfo& info) {
  // (fn(owner, id)): how a dormant task is activated (RuntimeCore::OnActivate).
  OpenCore(info.Env())->SetActivate(info[0]);
  return info.Env().Undefined();
}

Napi::Value Runtime::JS_restoreInbox(const Napi::CallbackInfo& info) {
  // (id): a restored durable task's messages not yet received, back into
  // its mailbox in order.
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  const std::string id = info[0].As<Napi::String>().Utf8Value();
  uint64_t key = 0;
  if (!core->restoring || !core->scheduler->ParseId(id, &key)) return env.Undefined();
  lua_State* L = core->host->current();
  std::string error;
  bool ok;
  {
    LuaHost::HostSection section(core->host.get(), L);
    ok = core->scheduler->EnsureReplayer().RestoreInbox(key, core->restoring->TakeInbox(id), L, &error);
  }
  if (!ok) ThrowError(env, "ERR_STORE_CORRUPT", error);
  core->OnScheduleChange();
  return env.Undefined();
}

Napi::Value Runtime::JS_restoreEnd(const Napi::CallbackInfo& info) {
  core_->restoring.reset();
  core_->index_reading.reset();
  core_->index_copy.reset();
  return info.Env().Undefined();
}

Napi::Value Runtime::JS_pauseCollector(const Napi::CallbackInfo& info) {
  // (true | false): the collector stops while the durable tasks are restored
  // (their replays make garbage all at once; a collection among them
  // re-traversed every task restored so far), and runs again after.
  RuntimeCore* core = OpenCore(info.Env());
  lua_gc(core->host->main(), info[0].ToBoolean() ? LUA_GCSTOP : LUA_GCRESTART);
  return info.Env().Undefined();
}

Napi::Value Runtime::JS_forgetDurable(const Napi::CallbackInfo& info) {
  RuntimeCore* core = OpenCore(info.Env());
  core->scheduler->EnsureReplayer().Forget(info[0].As<Napi::String>().Utf8Value());
  return info.Env().Undefined();
}

Napi::Value Runtime::JS_setDurable(const Napi::CallbackInfo& info) {
  // (ok: the store keeps journals, retain: end records are kept, skipMissed,
  // indexed: durable tasks keep an index entry)
  // A store that keeps no journals leaves the scheduler without a Replayer.
  RuntimeCore* core = OpenCore(info.Env());
  if (!info[0].ToBoolean()) return info.Env().Undefined();
  Replayer& durable = core->scheduler->EnsureReplayer();
  durable.set_ok(true);
  durable.set_retain_ends(info[1].ToBoolean());
  durable.set_skip_missed(info[2].ToBoolean());
  durable.set_indexed(info[3].ToBoolean());
  durable.set_async_reads(info[4].ToBoolean());
  if (info[5].IsString()) durable.set_index_mark(info[5].As<Napi::String>().Utf8Value());
  return info.Env().Undefined();
}

Napi::Value Runtime::JS_putBackJournal(const Napi::CallbackInfo& info) {
  // (what takeJournal gave, or those of its records a store did not refuse)
  if (core_->closed()) return info.Env().Undefined();
  if (const SharedWrites writes = UnwrapJournal(info[0])) {
    core_->scheduler->EnsureReplayer().PutBackWrites(*writes);
  } else if (info[0].IsArray()) {
    core_->scheduler->EnsureReplayer().PutBackWrites(WritesOf<StoreWrite>(info[0].As<Napi::Array>()));
  }
  return info.Env().Undefined();
}

Napi::Value Runtime::JS_lock(const Napi::CallbackInfo& info) {
  RuntimeCore* core = OpenCore(info.Env());
  core->scheduler->Lock();
  core->OnScheduleChange();
  return info.Env().Undefined();
}

Napi::Value Runtime::JS_unlock(const Napi::CallbackInfo& info) {
  if (core_->closed()) return info.Env().Undefined();
  core_->scheduler->Unlock();
  core_->AfterEntry();
  return info.Env().Undefined();
}

}  // namespace lua_tasks
