// SPDX-License-Identifier: MIT
// Runtime's persistence: snapshot and restore of tasks.state, at once or in slices, and the snapshot lock.
#include "runtime.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "errors.hpp"
#include "state_codec.hpp"
#include "store_reader.hpp"
#include "tasks_state.hpp"

namespace lua_tasks {

namespace {

// A Buffer over the snapshot's own block, freed with it: no copy of
// megabytes on the loop. A copy only where external buffers are refused
// (a V8 sandbox).
Napi::Value SnapshotBuffer(Napi::Env env, SnapshotBytes bytes) {
  auto owned = std::make_unique<SnapshotBytes>(std::move(bytes));
  napi_value out;
  if (napi_create_external_buffer(
          env, owned->size(), const_cast<char*>(owned->data()),
          [](napi_env, void*, void* hint) { std::unique_ptr<SnapshotBytes> freed(static_cast<SnapshotBytes*>(hint)); },
          owned.get(), &out) == napi_ok) {
    owned.release();  // the Buffer's finalizer has it now
    return Napi::Value(env, out);
  }
  return Napi::Buffer<char>::Copy(env, owned->data(), owned->size());
}

// A step's budget from JS milliseconds; anything else is the smallest slice.
int64_t BudgetNs(const Napi::Value& ms) {
  if (!ms.IsNumber()) return 0;
  const double ns = ms.As<Napi::Number>().DoubleValue() * 1e6;
  return ns > 0 ? static_cast<int64_t>(std::min(ns, 1e15)) : 0;
}

}  // namespace

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
                   &failure)) {
    ThrowError(env, failure == CodecFailure::kNoRoom ? "ERR_MEMORY_LIMIT" : "ERR_STORE_CORRUPT", error);
  }
  SetTasksState(L, base + 1);
  lua_settop(L, base);
  return env.Undefined();
}

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

Napi::Value Runtime::JS_restoreAbort(const Napi::CallbackInfo& info) {
  if (!core_->closed()) core_->AbortRestore();
  return info.Env().Undefined();
}

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
  // side (lib/commit_queue.js) makes the records and slices faster.
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
  Napi::Array batch = info[0].As<Napi::Array>();
  std::vector<KeyedWrite> writes;
  writes.reserve(batch.Length());
  for (uint32_t i = 0; i < batch.Length(); ++i) {
    Napi::Object record = batch.Get(i).As<Napi::Object>();
    KeyedWrite w{record.Get("key").As<Napi::String>().Utf8Value(), std::nullopt};
    Napi::Value value = record.Get("value");
    if (value.IsTypedArray()) {
      auto bytes = value.As<Napi::Uint8Array>();
      w.value.emplace(reinterpret_cast<const char*>(bytes.Data()), bytes.ByteLength());
    }
    writes.push_back(std::move(w));
  }
  core_->keyed.PutBack(std::move(writes));
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
