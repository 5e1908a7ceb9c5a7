// SPDX-License-Identifier: MIT
// LuaValue handles: Lua functions, coroutines and userdata held by JS.
//
// A handle owns a registry slot and a shared_ptr to its RuntimeCore, so the
// state outlives every handle that can still reach it. The slot is freed by
// the handle's finalizer through LuaHost::DeferUnref (finalizers may run in
// the middle of a conversion, so they never touch the Lua stack).
#include "addon/values/lua_value.hpp"

#include <memory>
#include <string>
#include <vector>

#include <napi.h>

#include "addon/errors.hpp"
#include "addon/runtime/runtime_core.hpp"
#include "addon/values/convert.hpp"

namespace lua_tasks {

namespace {

// Marks objects made by WrapLuaValue (Node-API type tag).
constexpr napi_type_tag kLuaValueTag = {0x6c75615f7461736bull, 0x4c756156616c7565ull};

struct LuaValueData {
  std::shared_ptr<RuntimeCore> core;
  int ref;        // registry slot in core's state
  bool callback;  // handed to JS by Lua: failures from the loop are reported, not thrown
};

void Finalize(napi_env env, void* data, void* hint) {
  std::unique_ptr<LuaValueData> d(static_cast<LuaValueData*>(data));
  if (d->core->host) d->core->host->DeferUnref(d->ref);
}

// Calls the function in registry slot `ref` with JS arguments; see CallLua.
napi_value Call(RuntimeCore* core, int ref, napi_value* argv, size_t argc) {
  napi_env env = core->env;
  lua_State* L = core->host->current();
  const int base = lua_gettop(L);
  if (!lua_checkstack(L, static_cast<int>(argc) + 8)) {
    ThrowError(Napi::Env(env), "ERR_CONVERSION", "Too many arguments for a Lua call: " + std::to_string(argc) + ".");
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
  try {
    LuaHost::HostSection section(core->host.get(), L);
    const size_t before = core->MemoryUsed();
    PushJsValues(core, L, argv, argc);
    core->CheckMemory(L, base, before);
  } catch (...) {
    lua_settop(L, base);
    core->AfterEntry();  // a close() a getter asked for waited for this
    throw;
  }
  if (core->closed()) {  // a getter closed the runtime: no Lua runs now
    lua_settop(L, base);
    core->AfterEntry();
    ThrowError(Napi::Env(env), "ERR_RUNTIME_CLOSED", "This Lua runtime is closed.");
  }
  return CallLua(core, L, static_cast<int>(argc), false);
}

// The JS function behind every Lua function handle.
napi_value CallLuaFunction(napi_env env, napi_callback_info info) {
  try {
    size_t argc = 8;
    napi_value small[8];
    void* data;
    Check(env, napi_get_cb_info(env, info, &argc, small, nullptr, &data), "get arguments");
    std::vector<napi_value> big;
    napi_value* argv = small;
    if (argc > 8) {
      big.resize(argc);
      Check(env, napi_get_cb_info(env, info, &argc, big.data(), nullptr, nullptr), "get arguments");
      argv = big.data();
    }
    auto* d = static_cast<LuaValueData*>(data);
    RuntimeCore* core = d->core.get();
    if (core->closed()) {
      if (!d->callback) ThrowError(Napi::Env(env), "ERR_RUNTIME_CLOSED", "This Lua runtime is closed.");
      // A callback Lua handed out (a timer, a listener) firing after close():
      // thrown from the loop it would be an uncaught exception that ends the
      // process. Reported instead (a warning), and the call does nothing.
      core->OnCallbackError(MakeError(Napi::Env(env), "ERR_RUNTIME_CLOSED",
                                      "A Lua callback was called after its runtime was closed; it did not run."));
      return nullptr;
    }
    if (!d->callback || core->host->depth() > 0) return Call(core, d->ref, argv, argc);
    try {
      return Call(core, d->ref, argv, argc);
    } catch (const Napi::Error& e) {
      // No Lua caller to raise to: the runtime hears it, the caller gets undefined.
      core->OnCallbackError(e.Value());
      return nullptr;
    }
  } catch (const Napi::Error& e) {
    e.ThrowAsJavaScriptException();
  } catch (const std::exception& e) {
    napi_throw_error(env, nullptr, e.what());
  }
  return nullptr;
}

}  // namespace

napi_value CallLua(RuntimeCore* core, lua_State* L, int nargs, bool all) {
  LuaHost* host = core->host.get();
  const int base = lua_gettop(L) - nargs - 1;
  napi_env env = core->env;
  if (host->too_deep()) {
    lua_settop(L, base);
    ThrowError(Napi::Env(env), "ERR_LUA_RUNTIME",
               "JS and Lua call each other " + std::to_string(host->depth()) + " levels deep (at most " +
                   std::to_string(LuaHost::kMaxDepth) + " levels and " +
                   std::to_string(LuaHost::kMaxStackBytes / 1024) +
                   " KiB of C stack); refusing to go deeper (C stack overflow).");
  }
  int status;
  {
    LuaHost::Entry entry(host, L);
    status = host->PCall(L, nargs, all ? LUA_MULTRET : 1);
  }
  napi_value out = nullptr;
  try {
    // Killed for its CPU budget: an error, also when Lua code swallowed the
    // kill (coroutine.resume returns it as a value) and went on to return,
    // as a task would be (Scheduler::RunTask). Only the outermost entry's
    // window says so (depth 0 again): inside a task or another call the
    // flag is an earlier call's.
    if (status == LUA_OK && host->depth() == 0 && host->last_killed()) {
      lua_settop(L, base);
      lua_pushliteral(L, "killed");
      status = LUA_ERRRUN;
    }
    if (status != LUA_OK) {
      throw Napi::Error(env, LuaErrorToJs(core, L, status));
    }
    LuaHost::HostSection section(host, L);
    if (all) {
      // One conversion for all the results: a value returned twice crosses once.
      const int n = lua_gettop(L) - base;
      ValueArray results(n);
      napi_value* values = results.data();
      ToJsValues(core, L, base + 1, n, values, false, true);  // nil inside an array is null (docs/design.md#conversion)
      Check(env, napi_create_array_with_length(env, n, &out), "create array");
      for (int i = 0; i < n; ++i) Check(env, napi_set_element(env, out, i, values[i]), "set element");
    } else {
      out = ToJs(core, L, -1);
    }
  } catch (...) {
    if (core->host) lua_settop(L, base);
    core->AfterEntry();
    throw;
  }
  lua_settop(L, base);
  core->AfterEntry();
  return out;
}

napi_value WrapLuaValue(RuntimeCore* core, lua_State* L, int idx, bool callback) {
  napi_env env = core->env;
  const bool fn = lua_type(L, idx) == LUA_TFUNCTION;
  lua_pushvalue(L, idx);
  auto data = std::make_unique<LuaValueData>(
      LuaValueData{core->shared_from_this(), luaL_ref(L, LUA_REGISTRYINDEX), callback && fn});
  napi_value out;
  napi_status st;
  if (fn) {
    st = napi_create_function(env, "luaFunction", NAPI_AUTO_LENGTH, CallLuaFunction, data.get(), &out);
  } else {
    st = napi_create_object(env, &out);
    if (st == napi_ok) {
      napi_value type;
      napi_create_string_utf8(env, luaL_typename(L, idx), NAPI_AUTO_LENGTH, &type);
      napi_property_descriptor d{"luaType", nullptr, nullptr, nullptr, nullptr, type, napi_enumerable, nullptr};
      st = napi_define_properties(env, out, 1, &d);
    }
  }
  if (st == napi_ok) st = napi_type_tag_object(env, out, &kLuaValueTag);
  if (st == napi_ok) st = napi_wrap(env, out, data.get(), Finalize, nullptr, nullptr);
  if (st != napi_ok) {
    luaL_unref(L, LUA_REGISTRYINDEX, data->ref);
    ThrowPending(env, "wrapping a Lua value");
  }
  data.release();  // owned by the JS object now; freed in Finalize
  return out;
}

bool PushLuaValue(RuntimeCore* core, lua_State* L, napi_value v) {
  napi_env env = core->env;
  bool tagged = false;
  if (napi_check_object_type_tag(env, v, &kLuaValueTag, &tagged) != napi_ok || !tagged) return false;
  void* raw;
  Check(env, napi_unwrap(env, v, &raw), "unwrap");
  auto* d = static_cast<LuaValueData*>(raw);
  if (d->core.get() != core) {
    napi_valuetype t;
    napi_typeof(env, v, &t);
    if (t == napi_function) return false;  // crosses as a JS function that calls the other runtime
    ThrowError(Napi::Env(env), "ERR_CONVERSION",
               "Cannot pass a Lua value of one runtime into another runtime; runtimes share nothing.");
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, d->ref);
  return true;
}

}  // namespace lua_tasks
