// SPDX-License-Identifier: MIT
// tasks.store: get, set, delete and keys over the runtime's KeyedStore.
//
// Copy semantics: set encodes the value with the state codec at once (a
// value that cannot persist raises there, naming store["key"].path) and
// get decodes a fresh copy every call, so a COMMIT writes exactly what was
// set, and a nested change to a table got earlier is never half-committed.
//
// The C functions check their arguments, then call a helper that does the
// C++ work (codec jobs, strings, the store's reader, which may call JS) under
// a HostSection and returns a status with a message pushed; they raise only
// after it returned, with nothing that has a destructor in their frame.
#include "core/api/lua_api_store.hpp"
#include "core/api/lua_list.hpp"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/base/coded_error.hpp"
#include "core/base/utf8.hpp"
#include "core/codec/state_codec.hpp"
#include "core/host/lua_host.hpp"
#include "core/scheduling/scheduler.hpp"
#include "core/store/keyed_store.hpp"
#include "core/store/persist_limits.hpp"

namespace lua_tasks {

namespace {

KeyedStore* Store(lua_State* L) {
  return static_cast<KeyedStore*>(lua_touserdata(L, lua_upvalueindex(2)));
}

// A value this large took long enough to encode or decode to charge the
// running thread's CPU budget for it.
constexpr size_t kChargeFrom = size_t{64} << 10;

const PersistLimits& Limits(lua_State* L) {
  return static_cast<Scheduler*>(lua_touserdata(L, lua_upvalueindex(1)))->persist_limits();
}

// How a helper below ended: the C function raises accordingly, once the
// helper's C++ objects are gone.
enum class Outcome : uint8_t {
  kOk,
  kError,  // an error message is pushed
  kLimit,  // an ERR_STORE_LIMIT message is pushed
  kStop,   // the stop check said stop: raise it (LuaHost::RaiseStop)
};

int Raise(lua_State* L, Outcome outcome) {
  switch (outcome) {
    case Outcome::kLimit:
      return RaiseCodedError(L, ErrorCode::kStoreLimit, lua_tostring(L, -1));
    case Outcome::kStop:
      return LuaHost::RaiseStop(L);
    default:
      return lua_error(L);
  }
}

// Raises unless the runtime has a store that reads keyed values.
KeyedStore* NeedStore(lua_State* L, const char* fname) {
  LuaHost::RaiseIfClosing(L);
  auto* s = static_cast<Scheduler*>(lua_touserdata(L, lua_upvalueindex(1)));
  if (!s->has_store()) {
    luaL_error(L, "tasks.store.%s: this runtime has no store (create it with Runtime.open({ name, store }))", fname);
  }
  KeyedStore* store = Store(L);
  if (store->reader() == nullptr) {
    luaL_error(L,
               "tasks.store.%s: the runtime's store keeps only whole snapshots of tasks.state; tasks.store needs a "
               "store with reader() and write() (store interface v2)",
               fname);
  }
  return store;
}

// Pushes `s` quoted as a Lua string literal, cut at 60 bytes (a key in a
// message or a path). Stack: +1.
void PushQuoted(lua_State* L, const char* s, size_t n) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addchar(&b, '"');
  for (size_t i = 0; i < n && i < 60; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      luaL_addchar(&b, '\\');
      luaL_addchar(&b, static_cast<char>(c));
    } else if (c < 0x20 || c == 0x7f) {
      char esc[8];
      snprintf(esc, sizeof esc, "\\%u", c);
      luaL_addstring(&b, esc);
    } else {
      luaL_addchar(&b, static_cast<char>(c));  // UTF-8 as it is; bad bytes show as they are
    }
  }
  luaL_addchar(&b, '"');
  if (n > 60) luaL_addstring(&b, "...");
  luaL_pushresult(&b);
}

// The key at `arg`: a string of 1-512 bytes of valid UTF-8 that the store
// takes (its declared limits: a shorter maximum, no NUL), else raises.
const char* CheckKey(lua_State* L, int arg, size_t* n) {
  if (lua_type(L, arg) != LUA_TSTRING) luaL_typeerror(L, arg, "string key");
  const char* key = lua_tolstring(L, arg, n);
  if (*n == 0 || *n > kMaxStoreKeyBytes) {
    PushQuoted(L, key, *n);
    luaL_argerror(L, arg,
                  lua_pushfstring(L, "key %s is %d bytes; keys are 1-%d bytes", lua_tostring(L, -1),
                                  static_cast<int>(*n), static_cast<int>(kMaxStoreKeyBytes)));
  }
  if (!IsValidUtf8(key, *n)) {
    PushQuoted(L, key, *n);
    luaL_argerror(L, arg, lua_pushfstring(L, "key %s is not valid UTF-8", lua_tostring(L, -1)));
  }
  const PersistLimits& limits = Limits(L);
  if (*n > limits.key_bytes) {
    PushQuoted(L, key, *n);
    lua_pushfstring(L, "bad argument #%d: key %s is %d bytes; the runtime's store takes keys of at most %d bytes", arg,
                    lua_tostring(L, -1), static_cast<int>(*n), static_cast<int>(limits.key_bytes));
    RaiseCodedError(L, ErrorCode::kStoreLimit, lua_tostring(L, -1));
  }
  if (!limits.key_nul && std::memchr(key, 0, *n) != nullptr) {
    PushQuoted(L, key, *n);
    lua_pushfstring(L, "bad argument #%d: key %s holds a NUL byte, which the runtime's store does not take in keys",
                    arg, lua_tostring(L, -1));
    RaiseCodedError(L, ErrorCode::kStoreLimit, lua_tostring(L, -1));
  }
  return key;
}

// Pushes the newest value of `key` (a fresh decoded copy), or nil, decoded
// under the memory limit and the stop check. Stack: +1.
Outcome Fetch(lua_State* L, KeyedStore* store, std::string_view key) {
  LuaHost* host = LuaHost::From(L);
  LuaHost::HostSection section(host, L);
  std::string bytes;
  std::string error;
  switch (store->Get(key, &bytes, &error)) {
    case KeyedStore::Read::kMissing:
      lua_pushnil(L);
      return Outcome::kOk;
    case KeyedStore::Read::kFailed:
      PushQuoted(L, key.data(), key.size());
      lua_pushfstring(L, "tasks.store.get: cannot read %s from the store: %s", lua_tostring(L, -1), error.c_str());
      lua_remove(L, -2);
      return Outcome::kError;
    case KeyedStore::Read::kFound:
      break;
  }
  const MemoryBudget& memory = host->memory();
  const size_t before = memory.used;
  StateDecoder decoder(L, bytes, Decoding(host));
  if (decoder.Finish() != CodecProgress::kDone) {
    if (decoder.failure() == CodecFailure::kStopped) return Outcome::kStop;
    PushQuoted(L, key.data(), key.size());
    if (decoder.failure() == CodecFailure::kNoRoom) {
      lua_pushfstring(L, "not enough memory: tasks.store.get(%s): %s", lua_tostring(L, -1), decoder.error().c_str());
    } else {
      lua_pushfstring(L, "tasks.store.get: the stored value of %s does not read: %s", lua_tostring(L, -1),
                      decoder.error().c_str());
    }
    lua_remove(L, -2);
    return Outcome::kError;
  }
  decoder.PushResult(L);
  if (bytes.size() >= kChargeFrom) host->Charge(L);
  // Decoded with the limit lifted (a HostSection): a value that took the
  // state past memoryLimit is refused as any allocation past it would be.
  if (memory.limit != 0 && memory.used > memory.limit && memory.used > before) {
    lua_pop(L, 1);
    PushQuoted(L, key.data(), key.size());
    lua_pushfstring(L, "not enough memory: tasks.store.get(%s) would take the state past its memoryLimit (%d KiB)",
                    lua_tostring(L, -1), static_cast<int>(memory.limit / 1024));
    lua_remove(L, -2);
    return Outcome::kError;
  }
  return Outcome::kOk;
}

// Encodes the value at `idx` and buffers it as key's new value, within
// maxValueBytes and maxPendingBytes. On failure the message is pushed
// ("store[\"k\"].f: cannot persist a function"), `root` being the path's
// start. Stack: +0, or +1 on failure.
Outcome Encode(lua_State* L, KeyedStore* store, std::string_view key, int idx, const char* root) {
  LuaHost* host = LuaHost::From(L);
  LuaHost::HostSection section(host, L);
  const PersistLimits& limits = Limits(L);
  StateEncoder encoder(L, idx, root, limits.Encoding(host));
  if (encoder.Finish() != CodecProgress::kDone) {
    switch (encoder.failure()) {
      case CodecFailure::kStopped:
        return Outcome::kStop;
      case CodecFailure::kTooLarge:
        lua_pushfstring(L, "tasks.store.set: %s: %s", encoder.error().c_str(),
                        LimitAdvice("maxValueBytes", limits.value_bytes).c_str());
        return Outcome::kLimit;
      default:
        lua_pushfstring(L, "tasks.store.set: %s", encoder.error().c_str());
        return Outcome::kError;
    }
  }
  SnapshotBytes bytes = encoder.TakeBytes();
  // Long work the instruction count did not see: the next instruction reads
  // the clock (as the bounded library functions do).
  if (bytes.size() >= kChargeFrom) host->Charge(L);
  const size_t pending = store->pending_bytes() - store->dirty_bytes_of(key) + key.size() + bytes.size();
  if (pending > limits.pending_bytes) {
    lua_pushfstring(L,
                    "tasks.store.set: %s of %s bytes would make %s bytes of tasks.store writes wait for a COMMIT; %s. "
                    "COMMIT (coroutine.yield(\"COMMIT\")) before writing more",
                    root, std::to_string(bytes.size()).c_str(), std::to_string(pending).c_str(),
                    LimitAdvice("maxPendingBytes", limits.pending_bytes).c_str());
    return Outcome::kLimit;
  }
  store->Set(key, std::string(bytes.view()));
  return Outcome::kOk;
}

void Remove(lua_State* L, KeyedStore* store, std::string_view key) {
  LuaHost::HostSection section(LuaHost::From(L), L);
  store->Delete(key);
}

// Pushes the listing as an array. Returns false with the message pushed
// instead. Stack: +1.
bool List(lua_State* L, KeyedStore* store, std::string_view prefix, std::string_view after, size_t limit) {
  LuaHost::HostSection section(LuaHost::From(L), L);
  std::vector<std::string> keys;
  std::string error;
  if (!store->Keys(prefix, after, limit, &keys, &error)) {
    lua_pushfstring(L, "tasks.store.keys: cannot list the store's keys: %s", error.c_str());
    return false;
  }
  lua_createtable(L, static_cast<int>(keys.size()), 0);
  MarkList(L, -1);
  lua_Integer i = 0;
  for (const std::string& k : keys) {
    lua_pushlstring(L, k.data(), k.size());
    lua_rawseti(L, -2, ++i);
  }
  return true;
}

// get(key) -> value | nil
int l_store_get(lua_State* L) {
  KeyedStore* store = NeedStore(L, "get");
  size_t n;
  const char* key = CheckKey(L, 1, &n);
  const Outcome outcome = Fetch(L, store, std::string_view(key, n));
  if (outcome != Outcome::kOk) return Raise(L, outcome);
  return 1;
}

// set(key, value): buffered until the next COMMIT; value is copied now.
int l_store_set(lua_State* L) {
  KeyedStore* store = NeedStore(L, "set");
  size_t n;
  const char* key = CheckKey(L, 1, &n);
  luaL_argcheck(L, !lua_isnoneornil(L, 2), 2, "nil is not a value (use tasks.store.delete(key) to remove a key)");
  lua_settop(L, 2);
  PushQuoted(L, key, n);
  const char* root = lua_pushfstring(L, "store[%s]", lua_tostring(L, -1));  // slot 4: alive until we return
  const Outcome outcome = Encode(L, store, std::string_view(key, n), 2, root);
  if (outcome != Outcome::kOk) return Raise(L, outcome);
  return 0;
}

// delete(key): buffered until the next COMMIT.
int l_store_delete(lua_State* L) {
  KeyedStore* store = NeedStore(L, "delete");
  size_t n;
  const char* key = CheckKey(L, 1, &n);
  Remove(L, store, std::string_view(key, n));
  return 0;
}

// keys(prefix [, after [, limit]]) -> { key, ... } sorted bytewise
int l_store_keys(lua_State* L) {
  KeyedStore* store = NeedStore(L, "keys");
  size_t np;
  const char* prefix = luaL_checklstring(L, 1, &np);
  size_t na = 0;
  const char* after = luaL_optlstring(L, 2, "", &na);
  const lua_Integer limit = luaL_optinteger(L, 3, kDefaultKeysLimit);
  luaL_argcheck(L, limit >= 1 && limit <= kMaxKeysLimit, 3, "limit must be an integer from 1 to 100000");
  if (!List(L, store, std::string_view(prefix, np), std::string_view(after, na), static_cast<size_t>(limit))) {
    return lua_error(L);
  }
  return 1;
}

const luaL_Reg kStoreFuncs[] = {
    {"get", l_store_get}, {"set", l_store_set}, {"delete", l_store_delete}, {"keys", l_store_keys}, {nullptr, nullptr},
};

}  // namespace

void RegisterStoreApi(lua_State* L, Scheduler* scheduler, KeyedStore* store) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_getfield(L, -1, "tasks");
  if (lua_istable(L, -1)) {
    lua_createtable(L, 0, 4);
    lua_pushlightuserdata(L, scheduler);
    lua_pushlightuserdata(L, store);
    luaL_setfuncs(L, kStoreFuncs, 2);
    lua_setfield(L, -2, "store");
  }
  lua_pop(L, 2);
}

}  // namespace lua_tasks
