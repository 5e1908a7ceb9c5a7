// SPDX-License-Identifier: MIT
// Runtime: what rt.inspect reads of one task, a journal's records decoded, and the replay-only mode of `lua-tasks
// replay`.
#include <string>

#include "addon/runtime/runtime.hpp"
#include "core/durable/journal_history.hpp"
#include "core/durable/replayer.hpp"
#include "core/scheduling/task_where.hpp"
#include "core/store/persist_limits.hpp"

namespace lua_tasks {

Napi::Value Runtime::JS_inspect(const Napi::CallbackInfo& info) {
  // (id, where) -> undefined for no live task, else { durable, entry?, key?,
  // origin?, where?, source?, line?, whereError? }: the journal's entry and
  // idempotency key of a durable task; where: its coroutine's traceback.
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  Scheduler* s = core->scheduler.get();
  uint64_t key = 0;
  if (!s->ParseId(info[0].As<Napi::String>().Utf8Value(), &key)) return env.Undefined();
  Task* t = s->Find(key);
  if (t == nullptr) return env.Undefined();
  Napi::Object out = Napi::Object::New(env);
  const Journal* j = t->durable ? s->replayer()->JournalOf(t) : nullptr;
  out.Set("durable", Napi::Boolean::New(env, j != nullptr));
  if (j != nullptr) {
    out.Set("entry", Napi::String::New(env, j->entry));
    out.Set("key", j->key ? Napi::Value(Napi::String::New(env, *j->key)) : env.Null());
  }
  if (!info[1].ToBoolean()) return out;
  TaskWhere where;
  std::string error;
  if (!ReadWhere(core->host.get(), core->host->current(), t->co, &where, &error)) {
    out.Set("whereError", Napi::String::New(env, error));
    return out;
  }
  out.Set("where", Napi::String::New(env, where.traceback));
  if (where.line > 0) {
    out.Set("source", Napi::String::New(env, where.source));
    out.Set("line", Napi::Number::New(env, where.line));
  }
  if (!where.entry.empty()) out.Set("origin", Napi::String::New(env, where.entry));
  return out;
}

namespace {

Napi::Array Strings(Napi::Env env, const std::vector<std::string>& list) {
  Napi::Array a = Napi::Array::New(env, list.size());
  for (uint32_t i = 0; i < list.size(); ++i) a.Set(i, Napi::String::New(env, list[i]));
  return a;
}

Napi::Value Date(Napi::Env env, int64_t ms) {
  return Napi::Date::New(env, static_cast<double>(ms));
}

// One record as JS sees it in a history (docs/api.md#inspecting-a-task).
Napi::Object HistoryObject(Napi::Env env, const HistoryRecord& r) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("seq", Napi::Number::New(env, static_cast<double>(r.seq)));
  o.Set("kind", Napi::String::New(env, r.ok || !r.what.empty() ? RecordKindKey(r.kind) : "damaged"));
  if (!r.what.empty()) o.Set("what", Napi::String::New(env, r.what));
  if (!r.ok) {
    o.Set("error", Napi::String::New(env, r.error));
    return o;
  }
  if (r.name) o.Set(r.kind == RecordKind::kStart ? "entry" : "name", Napi::String::New(env, *r.name));
  if (r.kind == RecordKind::kIndex) {
    o.Set("status", Napi::String::New(env, r.status));
    o.Set("key", r.key ? Napi::Value(Napi::String::New(env, *r.key)) : env.Null());
  }
  if (r.kind == RecordKind::kStart || r.kind == RecordKind::kEnd) {
    o.Set("key", r.key ? Napi::Value(Napi::String::New(env, *r.key)) : env.Null());
    if (r.label) o.Set("label", Napi::String::New(env, *r.label));
  }
  if (r.has_yield) {
    o.Set("instruction", Napi::String::New(env, WaitKindName(r.yield.kind)));
    o.Set("start", Date(env, r.yield.wall_start / 1000000));
    if (r.yield.wall_deadline != 0) o.Set("deadline", Date(env, r.yield.wall_deadline / 1000000));
  }
  if (r.kind == RecordKind::kEnd) {
    o.Set("status", Napi::String::New(env, r.status));
    o.Set("ended", Date(env, r.ended_ms));
  }
  if (r.kind == RecordKind::kCommitFailed) o.Set("landed", Napi::Number::New(env, static_cast<double>(r.landed)));
  if (r.kind != RecordKind::kYield && r.kind != RecordKind::kPatch && r.kind != RecordKind::kIndex) {
    o.Set(r.kind == RecordKind::kStart ? "args" : "values", Strings(env, r.values));
  }
  return o;
}

}  // namespace

Napi::Value Runtime::JS_describeRecords(const Napi::CallbackInfo& info) {
  // (keys[], records[]) -> one object a record, in order: a journal's
  // records as the store keeps them, decoded on this state, under its
  // memory limit, and summarised.
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  Napi::Array keys = info[0].As<Napi::Array>();
  Napi::Array records = info[1].As<Napi::Array>();
  Napi::Array out = Napi::Array::New(env, keys.Length());
  lua_State* L = core->host->current();
  for (uint32_t i = 0; i < keys.Length(); ++i) {
    const std::string key = keys.Get(i).As<Napi::String>().Utf8Value();
    Napi::Value v = records.Get(i);
    std::string bytes;
    if (v.IsTypedArray()) {
      auto b = v.As<Napi::Uint8Array>();
      bytes.assign(reinterpret_cast<const char*>(b.Data()), b.ByteLength());
    }
    HistoryRecord r;
    {
      LuaHost::HostSection section(core->host.get(), L);
      r = ReadHistoryRecord(L, key, std::move(bytes), Decoding(core->host.get()));
    }
    out.Set(i, HistoryObject(env, r));
  }
  return out;
}

Napi::Value Runtime::JS_setReplayOnly(const Napi::CallbackInfo& info) {
  // (true): durable tasks replay their journals and stop where they end (`lua-tasks replay`).
  RuntimeCore* core = OpenCore(info.Env());
  core->scheduler->EnsureReplayer().set_replay_only(info[0].ToBoolean());
  return info.Env().Undefined();
}

}  // namespace lua_tasks
