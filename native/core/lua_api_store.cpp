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
#include "lua_api_store.hpp"

#include <cstdio>
#include <string>
#include <vector>

#include "keyed_store.hpp"
#include "lua_host.hpp"
#include "scheduler.hpp"
#include "state_codec.hpp"
#include "utf8.hpp"

namespace lua_tasks {

namespace {

KeyedStore* Store(lua_State* L) {
  return static_cast<KeyedStore*>(lua_touserdata(L, lua_upvalueindex(2)));
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

// The key at `arg`: a string of 1-512 bytes of valid UTF-8, else raises.
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
  return key;
}

// Pushes the newest value of `key` (a fresh decoded copy), or nil. Returns
// false with the message pushed instead. Stack: +1.
bool Fetch(lua_State* L, KeyedStore* store, std::string_view key) {
  LuaHost::HostSection section(LuaHost::From(L), L);
  std::string bytes;
  std::string error;
  switch (store->Get(key, &bytes, &error)) {
    case KeyedStore::Read::kMissing:
      lua_pushnil(L);
      return true;
    case KeyedStore::Read::kFailed:
      PushQuoted(L, key.data(), key.size());
      lua_pushfstring(L, "tasks.store.get: cannot read %s from the store: %s", lua_tostring(L, -1), error.c_str());
      lua_remove(L, -2);
      return false;
    case KeyedStore::Read::kFound:
      break;
  }
  const MemoryBudget& memory = LuaHost::From(L)->memory();
  const size_t before = memory.used;
  StateDecoder decoder(L, bytes);
  if (decoder.Finish() != CodecProgress::kDone) {
    PushQuoted(L, key.data(), key.size());
    lua_pushfstring(L, "tasks.store.get: the stored value of %s does not read: %s", lua_tostring(L, -1),
                    decoder.error().c_str());
    lua_remove(L, -2);
    return false;
  }
  decoder.PushResult(L);
  // Decoded with the limit lifted (a HostSection): a value that took the
  // state past memoryLimit is refused as any allocation past it would be.
  if (memory.limit != 0 && memory.used > memory.limit && memory.used > before) {
    lua_pop(L, 1);
    PushQuoted(L, key.data(), key.size());
    lua_pushfstring(L, "not enough memory: tasks.store.get(%s) would take the state past its memoryLimit (%d KiB)",
                    lua_tostring(L, -1), static_cast<int>(memory.limit / 1024));
    lua_remove(L, -2);
    return false;
  }
  return true;
}

// Encodes the value at `idx` and buffers it as key's new value. Returns false
// with the encoder's message pushed ("store[\"k\"].f: cannot persist a
// function"), `root` being the path's start. Stack: +0, or +1 on failure.
bool Encode(lua_State* L, KeyedStore* store, std::string_view key, int idx, const char* root) {
  LuaHost::HostSection section(LuaHost::From(L), L);
  StateEncoder encoder(L, idx, root);
  if (encoder.Finish() != CodecProgress::kDone) {
    lua_pushfstring(L, "tasks.store.set: %s", encoder.error().c_str());
    return false;
  }
  const SnapshotBytes bytes = encoder.TakeBytes();
  store->Set(key, std::string(bytes.view()));
  return true;
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
  if (!Fetch(L, store, std::string_view(key, n))) return lua_error(L);
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
  if (!Encode(L, store, std::string_view(key, n), 2, root)) return lua_error(L);
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
