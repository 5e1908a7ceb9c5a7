// SPDX-License-Identifier: MIT
// NativeStore: a store directory's SQLite database as a JS object (lib/store/directory.js drives it).
#include "addon/store/native_store.hpp"

#include <cmath>
#include <utility>

#include "addon/addon_data.hpp"
#include "addon/errors.hpp"
#include "addon/store/journal_batch.hpp"
#include "addon/values/owned_buffer.hpp"
#include "core/durable/durable_record.hpp"

namespace lua_tasks {

// The loop's side: a uv_check that hands this turn's jobs over (with a
// uv_idle beside it while jobs wait, so the loop does not block in its poll
// first), and the uv_async the writer wakes. Freed in the last close callback.
struct NativeStore::Handles {
  uv_check_t check;
  uv_idle_t idle;
  uv_async_t async;
  NativeStore* owner;  // null once closing
  int open = 3;
  // The environment's cleanup hook, whose argument is this struct: it lives
  // as long as the handles, and is removed once they are closed, so a
  // Worker's loop does not end under them and the hook never outlives them.
  napi_async_cleanup_hook_handle hook = nullptr;
};

namespace {

// SQLite's name of a primary result code, for err.code when the OS gave no errno.
const char* SqliteCodeName(int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
      return "SQLITE_BUSY";
    case SQLITE_LOCKED:
      return "SQLITE_LOCKED";
    case SQLITE_NOMEM:
      return "SQLITE_NOMEM";
    case SQLITE_READONLY:
      return "SQLITE_READONLY";
    case SQLITE_IOERR:
      return "SQLITE_IOERR";
    case SQLITE_FULL:
      return "SQLITE_FULL";
    case SQLITE_CANTOPEN:
      return "SQLITE_CANTOPEN";
    case SQLITE_PERM:
      return "SQLITE_PERM";
    case SQLITE_TOOBIG:
      return "SQLITE_TOOBIG";
    default:
      return "SQLITE_ERROR";
  }
}

// A JS error for a StoreError's fields: ERR_STORE_CORRUPT for damage, else the
// OS's code (EIO, ENOSPC, EACCES) when SQLite knows it, else SQLite's.
Napi::Value StoreErrorValue(Napi::Env env, StoreFailure failure, int sqlite_code, int sys_errno,
                            const std::string& message, const std::string& path) {
  Napi::Object props = Napi::Object::New(env);
  props.Set("path", path);
  if (sqlite_code != 0) props.Set("sqliteCode", sqlite_code);
  if (failure == StoreFailure::kCorrupt) return MakeError(env, "ERR_STORE_CORRUPT", message, props);
  std::string code = SqliteCodeName(sqlite_code);
  if (sys_errno != 0) {
    code = uv_err_name(-sys_errno);
    props.Set("errno", -sys_errno);
  }
  return MakeError(env, code.c_str(), message, props);
}

[[noreturn]] void ThrowStoreError(Napi::Env env, const StoreError& e, const std::string& path) {
  throw Napi::Error(env, StoreErrorValue(env, e.failure(), e.sqlite_code(), e.sys_errno(), e.what(), path));
}

std::string StringArg(const Napi::CallbackInfo& info, size_t i, const char* what) {
  if (!info[i].IsString()) ThrowError(info.Env(), "ERR_INVALID_ARG_TYPE", std::string(what) + " must be a string.");
  return info[i].As<Napi::String>().Utf8Value();
}

// A Buffer or Uint8Array, or a clear error.
Napi::Uint8Array BytesArg(Napi::Env env, Napi::Value v, const std::string& what) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) {
    ThrowError(env, "ERR_INVALID_ARG_TYPE", what + " must be a Buffer or Uint8Array.");
  }
  return v.As<Napi::Uint8Array>();
}

// A Buffer or Uint8Array's bytes, copied (the writer thread reads them later).
std::string BytesOf(Napi::Env env, Napi::Value v, const std::string& what) {
  Napi::Uint8Array a = BytesArg(env, v, what);
  return std::string(reinterpret_cast<const char*>(a.Data()), a.ByteLength());
}

int64_t IntegerOr(Napi::Value v, int64_t fallback) {
  if (!v.IsNumber()) return fallback;
  const double d = v.As<Napi::Number>().DoubleValue();
  return std::isfinite(d) ? static_cast<int64_t>(d) : fallback;
}

// A Buffer that owns the string's block: no copy of a big snapshot on the loop.
Napi::Value BufferOf(Napi::Env env, std::string bytes) {
  return OwnedBuffer(env, std::move(bytes));
}

}  // namespace

Napi::Function NativeStore::Init(Napi::Env env) {
  return DefineClass(env, "NativeStore",
                     {
                         InstanceMethod<&NativeStore::JS_write>("write"),
                         InstanceMethod<&NativeStore::JS_load>("load"),
                         InstanceMethod<&NativeStore::JS_claim>("claim"),
                         InstanceMethod<&NativeStore::JS_importSnapshot>("importSnapshot"),
                         InstanceMethod<&NativeStore::JS_checkpoint>("checkpoint"),
                         InstanceMethod<&NativeStore::JS_get>("get"),
                         InstanceMethod<&NativeStore::JS_keys>("keys"),
                         InstanceMethod<&NativeStore::JS_names>("names"),
                         InstanceMethod<&NativeStore::JS_stats>("stats"),
                         InstanceMethod<&NativeStore::JS_close>("close"),
#ifdef LUA_TASKS_TEST_HOOKS
                         InstanceMethod<&NativeStore::JS_failNextTransactions>("failNextTransactions"),
#endif
                     });
}

namespace {
// Marks the objects that are NativeStores (NativeStore::From).
constexpr napi_type_tag kNativeStoreTag = {0x6c75612d7461736bULL, 0x732d73746f726531ULL};
}  // namespace

NativeStore* NativeStore::From(Napi::Value value) {
  if (!value.IsObject() || !value.As<Napi::Object>().CheckTypeTag(&kNativeStoreTag)) return nullptr;
  return Unwrap(value.As<Napi::Object>());
}

void NativeStore::ScanDurable(Napi::Env env, const std::string& name, JournalRestore* out) {
  Read(env, [&](StoreDb& db) {
    db.Scan(name, kJournalSpace, kIndexSpace,
            [out](int space, std::string_view key, std::string_view value) { out->Add(space, key, value); });
  });
}

void NativeStore::Read(Napi::Env env, const std::function<void(StoreDb&)>& read) {
  CheckOpen(env, "reader");
  try {
    read(*reader_);
  } catch (const StoreError& e) {
    ThrowStoreError(env, e, path_);
  }
}

NativeStore::NativeStore(const Napi::CallbackInfo& info) : Napi::ObjectWrap<NativeStore>(info), env_(info.Env()) {
  Napi::Env env = info.Env();
  info.This().As<Napi::Object>().TypeTag(&kNativeStoreTag);
  path_ = StringArg(info, 0, "The store directory") + "/" + kStoreDbFile;
  auto h = std::make_unique<Handles>();
  h->owner = this;
  Handles* raw = h.get();
  try {
    writer_ = std::make_unique<StoreWriter>(path_, [raw] { uv_async_send(&raw->async); });
    reader_ = std::make_unique<StoreDb>(path_, StoreDb::Access::kReadOnly);
  } catch (const StoreError& e) {
    writer_.reset();  // joins its thread before the handles it wakes exist
    ThrowStoreError(env, e, path_);
  }
  uv_loop_t* loop = nullptr;
  napi_get_uv_event_loop(env, &loop);
  uv_check_init(loop, &raw->check);
  uv_idle_init(loop, &raw->idle);
  uv_async_init(loop, &raw->async, [](uv_async_t* a) {
    auto* hs = static_cast<Handles*>(a->data);
    if (hs->owner == nullptr) return;
    NativeStore* self = hs->owner;
    try {
      Napi::Env e(self->env_);
      Napi::HandleScope scope(e);
      // A callback scope: promise reactions run when it closes, as after any I/O callback.
      Napi::CallbackScope cb(e, *self->async_context_);
      self->Deliver(e);
    } catch (...) {
      // Nothing may leave a libuv callback; an error here has no one to hear it.
    }
  });
  raw->check.data = raw->idle.data = raw->async.data = raw;
  uv_unref(reinterpret_cast<uv_handle_t*>(&raw->check));
  uv_unref(reinterpret_cast<uv_handle_t*>(&raw->idle));
  uv_unref(reinterpret_cast<uv_handle_t*>(&raw->async));
  handles_ = h.release();
  async_context_ = std::make_unique<Napi::AsyncContext>(env, "lua-tasks:store");
  // The async hook, as RuntimeCore's: the sync one must not close handles.
  napi_add_async_cleanup_hook(env, &NativeStore::OnCleanup, raw, &raw->hook);
}

NativeStore::~NativeStore() {
  Shutdown(false);
}

void NativeStore::OnCleanup(napi_async_cleanup_hook_handle handle, void* arg) {
  auto* h = static_cast<Handles*>(arg);
  h->hook = handle;
  NativeStore* self = h->owner;
  if (self == nullptr) return;  // closing already: the last close callback removes the hook
  // The environment is going: its async context is not destroyed from here
  // (as RuntimeCore's), only forgotten.
  static_cast<void>(self->async_context_.release());
  self->Shutdown(false);
}

void NativeStore::CheckOpen(Napi::Env env, const char* method) const {
  if (closed_) {
    ThrowError(env, "ERR_INVALID_STATE",
               std::string("The store of ") + path_ + " is closed: " + method + "() cannot be called after close().");
  }
}

Napi::Value NativeStore::Queue(Napi::Env env, StoreJobBody body, Pending::Kind kind, std::string name,
                               Napi::Reference<Napi::Value> lent) {
  const uint64_t id = next_id_++;
  queued_.push_back({id, std::move(body)});
  Napi::Promise::Deferred d = Napi::Promise::Deferred::New(env);
  Napi::Value promise = d.Promise();
  pending_.emplace(id, Pending{std::move(d), kind, std::move(name), std::move(lent)});
  if (queued_.size() == 1) {
    uv_check_start(&handles_->check, [](uv_check_t* c) {
      auto* hs = static_cast<Handles*>(c->data);
      if (hs->owner != nullptr) hs->owner->HandOver();
    });
    uv_idle_start(&handles_->idle, [](uv_idle_t*) {});
  }
  KeepAlive();
  return promise;
}

void NativeStore::HandOver() {
  uv_check_stop(&handles_->check);
  uv_idle_stop(&handles_->idle);
  if (queued_.empty()) return;
  writer_->Submit(std::exchange(queued_, {}));
}

// While anything is in flight the async handle holds the loop (a process
// does not exit under a write) and this object is kept from the GC.
void NativeStore::KeepAlive() {
  const bool busy = !pending_.empty();
  if (handles_ != nullptr) {
    auto* a = reinterpret_cast<uv_handle_t*>(&handles_->async);
    if (busy) {
      uv_ref(a);
    } else {
      uv_unref(a);
    }
  }
  if (busy != referenced_) {
    referenced_ = busy;
    if (busy) {
      Ref();
    } else {
      Unref();
    }
  }
}

void NativeStore::Deliver(Napi::Env env) {
  if (!writer_) return;
  std::vector<StoreOutcome> outcomes = writer_->TakeOutcomes();
  for (StoreOutcome& o : outcomes) Settle(env, o);
  KeepAlive();
}

void NativeStore::Settle(Napi::Env env, StoreOutcome& o) {
  auto it = pending_.find(o.id);
  if (it == pending_.end()) return;
  Pending p = std::move(it->second);
  pending_.erase(it);
  switch (o.kind) {
    case StoreOutcome::Kind::kDone:
      if (p.kind == Pending::Kind::kLoad) {
        p.deferred.Resolve(o.bytes ? BufferOf(env, std::move(*o.bytes)) : env.Null());
      } else if (p.kind == Pending::Kind::kImport) {
        p.deferred.Resolve(Napi::Boolean::New(env, o.written));
      } else {
        p.deferred.Resolve(env.Undefined());
      }
      return;
    case StoreOutcome::Kind::kRefused: {
      Napi::Object props = Napi::Object::New(env);
      props.Set("path", path_);
      props.Set("ownerToken", Napi::Number::New(env, static_cast<double>(o.owner_token)));
      p.deferred.Reject(MakeError(env, "ERR_STORE_LOCKED",
                                  "The batch of \"" + p.name + "\" was not written: its token is not the one " + path_ +
                                      " records for the name's owner (another owner took the name).",
                                  props));
      return;
    }
    case StoreOutcome::Kind::kFailed:
      p.deferred.Reject(StoreErrorValue(env, o.failure, o.sqlite_code, o.sys_errno, o.message, path_));
      return;
  }
}

Napi::Value NativeStore::JS_write(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CheckOpen(env, "write");
  if (!info[0].IsObject()) ThrowError(env, "ERR_INVALID_ARG_TYPE", "The batch must be an object.");
  Napi::Object o = info[0].As<Napi::Object>();
  StoreBatch b;
  if (!o.Get("name").IsString()) ThrowError(env, "ERR_INVALID_ARG_TYPE", "The batch's \"name\" must be a string.");
  b.name = o.Get("name").As<Napi::String>().Utf8Value();
  b.token = IntegerOr(o.Get("token"), 0);
  b.seq = IntegerOr(o.Get("seq"), 0);
  Napi::Value state = o.Get("state");
  Napi::Reference<Napi::Value> lent;
  if (!state.IsUndefined() && !state.IsNull()) {
    // Lent, not copied: a 50 MB snapshot's copy held the loop for ~40 ms.
    // The Buffer stays referenced until the outcome is settled.
    Napi::Uint8Array a = BytesArg(env, state, "The batch's \"state\"");
    b.borrowed_state = std::string_view(reinterpret_cast<const char*>(a.Data()), a.ByteLength());
    lent = Napi::Persistent(state);
  }
  Napi::Value writes = o.Get("writes");
  if (writes.IsArray()) {
    Napi::Array a = writes.As<Napi::Array>();
    b.writes.reserve(a.Length());
    for (uint32_t i = 0; i < a.Length(); i++) {
      Napi::Value wv = a.Get(i);
      if (!wv.IsObject()) ThrowError(env, "ERR_INVALID_ARG_TYPE", "Each of the batch's writes must be an object.");
      Napi::Object w = wv.As<Napi::Object>();
      StoreWrite sw;
      sw.space = static_cast<int>(IntegerOr(w.Get("space"), kSpaceStore));
      if (!w.Get("key").IsString()) ThrowError(env, "ERR_INVALID_ARG_TYPE", "A write's \"key\" must be a string.");
      sw.key = w.Get("key").As<Napi::String>().Utf8Value();
      Napi::Value v = w.Get("value");
      if (!v.IsNull() && !v.IsUndefined()) sw.value = BytesOf(env, v, "The value of store[\"" + sw.key + "\"]");
      b.writes.push_back(std::move(sw));
    }
  }
  // A runtime's journal batch (lib/runtime/commit_queue.js), applied after the writes.
  b.journal = UnwrapJournal(o.Get("journal"));
  std::string name = b.name;
  return Queue(env, std::move(b), Pending::Kind::kWrite, std::move(name), std::move(lent));
}

Napi::Value NativeStore::JS_load(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CheckOpen(env, "load");
  std::string name = StringArg(info, 0, "The name");
  return Queue(env, StoreLoad{name}, Pending::Kind::kLoad, name);
}

Napi::Value NativeStore::JS_claim(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CheckOpen(env, "claim");
  std::string name = StringArg(info, 0, "The name");
  const int64_t token = IntegerOr(info[1], 0);
  return Queue(env, StoreClaim{name, token}, Pending::Kind::kClaim, name);
}

Napi::Value NativeStore::JS_importSnapshot(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CheckOpen(env, "importSnapshot");
  std::string name = StringArg(info, 0, "The name");
  std::string bytes = BytesOf(env, info[1], "The snapshot");
  return Queue(env, StoreImport{name, std::move(bytes)}, Pending::Kind::kImport, name);
}

Napi::Value NativeStore::JS_checkpoint(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CheckOpen(env, "checkpoint");
  return Queue(env, StoreCheckpoint{}, Pending::Kind::kCheckpoint, std::string());
}

Napi::Value NativeStore::JS_get(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CheckOpen(env, "get");
  const std::string name = StringArg(info, 0, "The name");
  const std::string key = StringArg(info, 1, "The key");
  const int space = static_cast<int>(IntegerOr(info[2], kSpaceStore));  // 1 tasks.store, 2 journals
  std::optional<std::string> v;
  try {
    v = reader_->Get(name, space, key);
  } catch (const StoreError& e) {
    ThrowStoreError(env, e, path_);
  }
  return v ? BufferOf(env, std::move(*v)) : env.Null();
}

Napi::Value NativeStore::JS_names(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CheckOpen(env, "names");
  const std::string glob = info[0].As<Napi::String>().Utf8Value();
  const std::string after = info[1].As<Napi::String>().Utf8Value();
  const int64_t limit = IntegerOr(info[2], -1);
  std::vector<std::string> names;
  try {
    names = reader_->Names(glob, after, limit);
  } catch (const StoreError& e) {
    ThrowStoreError(env, e, path_);
  }
  Napi::Array out = Napi::Array::New(env, names.size());
  for (uint32_t i = 0; i < names.size(); i++) out.Set(i, Napi::String::New(env, names[i]));
  return out;
}

Napi::Value NativeStore::JS_keys(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CheckOpen(env, "keys");
  const std::string name = StringArg(info, 0, "The name");
  const std::string prefix = info[1].IsString() ? info[1].As<Napi::String>().Utf8Value() : std::string();
  const std::string after = info[2].IsString() ? info[2].As<Napi::String>().Utf8Value() : std::string();
  const int64_t limit = IntegerOr(info[3], -1);
  const int space = static_cast<int>(IntegerOr(info[4], kSpaceStore));
  std::vector<std::string> keys;
  try {
    keys = reader_->Keys(name, space, prefix, after, limit);
  } catch (const StoreError& e) {
    ThrowStoreError(env, e, path_);
  }
  Napi::Array out = Napi::Array::New(env, keys.size());
  for (uint32_t i = 0; i < keys.size(); i++) out.Set(i, Napi::String::New(env, keys[i]));
  return out;
}

Napi::Value NativeStore::JS_stats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object out = Napi::Object::New(env);
  const StoreWriter::Stats s = writer_ ? writer_->stats() : stats_at_close_;
  out.Set("transactions", Napi::Number::New(env, static_cast<double>(s.transactions)));
  out.Set("batches", Napi::Number::New(env, static_cast<double>(s.batches)));
  return out;
}

Napi::Value NativeStore::JS_close(const Napi::CallbackInfo& info) {
  Shutdown(true);
  return info.Env().Undefined();
}

#ifdef LUA_TASKS_TEST_HOOKS
Napi::Value NativeStore::JS_failNextTransactions(const Napi::CallbackInfo& info) {
  CheckOpen(info.Env(), "failNextTransactions");
  writer_->FailNextTransactions(static_cast<int>(IntegerOr(info[0], 1)));
  return info.Env().Undefined();
}
#endif

void NativeStore::Shutdown(bool notify) {
  if (closed_) return;
  closed_ = true;
  // The reader first: the last connection to close checkpoints the WAL into
  // the database and removes it, which a read-only one cannot do.
  reader_.reset();
  if (writer_) {
    if (!queued_.empty()) writer_->Submit(std::exchange(queued_, {}));
    writer_->Stop();  // finishes every job it was given: nothing half-written
    stats_at_close_ = writer_->stats();
    if (notify) {
      Napi::Env env(env_);
      Napi::HandleScope scope(env);
      Deliver(env);
    }
    writer_.reset();
  }
  pending_.clear();
  if (notify && referenced_) {
    referenced_ = false;
    Unref();
  }
  async_context_.reset();
  Handles* h = std::exchange(handles_, nullptr);
  if (h == nullptr) return;
  h->owner = nullptr;
  auto on_close = [](uv_handle_t* handle) {
    auto* hs = static_cast<Handles*>(handle->data);
    if (--hs->open > 0) return;
    std::unique_ptr<Handles> owned(hs);
    if (hs->hook != nullptr) napi_remove_async_cleanup_hook(hs->hook);
  };
  uv_close(reinterpret_cast<uv_handle_t*>(&h->check), on_close);
  uv_close(reinterpret_cast<uv_handle_t*>(&h->idle), on_close);
  uv_close(reinterpret_cast<uv_handle_t*>(&h->async), on_close);
}

}  // namespace lua_tasks
