// SPDX-License-Identifier: MIT
// JsRef: a JS value held by Lua (a function to call, an object kept by identity).
//
// A JsRef is a full userdata holding a strong napi_ref. A JS function crosses
// as a C closure (l_js_call) with its JsRef as upvalue 1, so Lua calls it like
// any function and the converter can still find the original JS function.
// Calling into JS from Lua follows the Lua/C++ rule of this codebase: the
// lua_CFunction is a thin shell; all C++ (handle scopes, exceptions,
// conversions) lives in a helper that returns a count or -1 with the error
// value pushed, and only then does the shell raise.
#include "js_ref.hpp"

#include <string>
#include <vector>

#include <napi.h>

#include "addon_data.hpp"
#include "convert.hpp"
#include "errors.hpp"
#include "runtime_core.hpp"

namespace lua_tasks {

namespace {

constexpr const char kMetaName[] = "lua-tasks.JsRef";

struct JsRefBox {
  napi_env env;
  napi_ref ref;  // strong; deleted by __gc
  bool boxed;    // ref holds { v: value } because value is a primitive (a thrown string, ...)
};

// The JS value a box holds.
napi_value BoxValue(JsRefBox* box) {
  napi_value v;
  if (napi_get_reference_value(box->env, box->ref, &v) != napi_ok) return nullptr;
  if (box->boxed) napi_get_named_property(box->env, v, "v", &v);
  return v;
}

RuntimeCore* CoreOf(lua_State* L) {
  return static_cast<RuntimeCore*>(LuaHost::From(L)->embedder);
}

JsRefBox* ToBox(RuntimeCore* core, lua_State* L, int idx) {
  if (lua_type(L, idx) != LUA_TUSERDATA || !lua_getmetatable(L, idx)) return nullptr;
  const bool ours = lua_topointer(L, -1) == core->jsref_mt;
  lua_pop(L, 1);
  return ours ? static_cast<JsRefBox*>(lua_touserdata(L, idx)) : nullptr;
}

int l_jsref_gc(lua_State* L) {
  auto* box = static_cast<JsRefBox*>(lua_touserdata(L, 1));
  if (box->ref != nullptr) napi_delete_reference(box->env, box->ref);
  box->ref = nullptr;
  return 0;
}

// Results of the C++ halves of the Lua-facing functions below.
constexpr int kRaise = -1;    // the error value is on top: raise it
constexpr int kSuspend = -2;  // the task awaits a promise: yield

// Starts awaiting `promise` in the running task, or pushes why it cannot.
// Returns kSuspend or kRaise.
int BeginAwait(RuntimeCore* core, lua_State* L, napi_value promise) {
  Napi::Env env(core->env);
  Task* t = core->scheduler->current();
  if (t == nullptr) {
    lua_settop(L, 0);
    PushJsError(core, L,
                MakeError(env, "ERR_NOT_IN_TASK",
                          "A JS function returned a Promise to Lua code that is not running in a task, so "
                          "nothing can wait for it. Call it from a task (rt.start, rt.call or tasks.start)."));
    return kRaise;
  }
  if (!lua_isyieldable(L)) {
    lua_settop(L, 0);
    lua_pushliteral(L, "cannot wait for a JS Promise here (inside a metamethod, a C function or a call from JS)");
    return kRaise;
  }
  napi_value argv[4], settle, recv, ignored;
  argv[0] = promise;
  napi_get_reference_value(core->env, core->settle, &settle);
  argv[1] = settle;
  napi_create_double(core->env, static_cast<double>(t->key), &argv[2]);
  napi_create_uint32(core->env, ++t->await_token, &argv[3]);
  napi_get_undefined(core->env, &recv);
  AddonData* data = AddonData::From(core->env);
  if (napi_call_function(core->env, recv, data->await_helper.Value(), 4, argv, &ignored) != napi_ok) {
    ThrowPending(core->env, "awaiting a promise");
  }
  t->Pend(WaitKind::kPromise);
  lua_settop(L, 0);
  return kSuspend;
}

// After an await: the task was resumed with (ok, value).
int k_await(lua_State* L, int status, lua_KContext ctx) {
  const int n = lua_gettop(L);
  if (n >= 2 && lua_toboolean(L, n - 1)) return 1;
  return lua_error(L);
}

// Suspends the running task until its promise settles (see BeginAwait).
int Suspend(lua_State* L) {
  RuntimeCore* core = CoreOf(L);
  Task* t = core->scheduler->current();
  if (L == t->co) return lua_yieldk(L, 0, 0, k_await);
  lua_pushlightuserdata(L, core->scheduler.get());  // the sentinel the resume wrappers pass up
  return lua_yieldk(L, 1, 0, k_await);
}

// Pushes the error for a failed JS call: the thrown value kept by reference.
void PushThrown(RuntimeCore* core, lua_State* L, const Napi::Error& e) noexcept {
  try {
    napi_value v = e.Value();
    if (v == nullptr) {
      lua_pushstring(L, e.what());
    } else {
      PushJsError(core, L, v);
    }
  } catch (...) {
    lua_pushstring(L, e.what());  // the thrown value could not be kept: its message at least
  }
}

// The body of l_js_call. Returns the number of results, or -1 with the error
// value pushed.
int CallJs(lua_State* L) noexcept {
  RuntimeCore* core = CoreOf(L);
  auto* box = static_cast<JsRefBox*>(lua_touserdata(L, lua_upvalueindex(1)));
  napi_env env = box->env;
  LuaHost::HostSection section(core->host.get(), L);
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) {
    lua_pushliteral(L, "cannot open a JS handle scope");
    return -1;
  }
  int result = 1;
  try {
    const int argc = lua_gettop(L);
    napi_value small[8];
    std::vector<napi_value> big;
    napi_value* argv = small;
    if (argc > 8) {
      big.resize(argc);
      argv = big.data();
    }
    ToJsValues(core, L, 1, argc, argv, true, false);  // one conversion; Lua functions: callbacks
    napi_value fn, recv, out;
    napi_get_reference_value(env, box->ref, &fn);
    napi_get_undefined(env, &recv);
    const napi_status st = napi_call_function(env, recv, fn, argc, argv, &out);
    if (st != napi_ok) ThrowPending(env, "calling a JS function");
    napi_valuetype type;
    napi_typeof(env, out, &type);
    bool promise = false;
    if (type == napi_object) napi_is_promise(env, out, &promise);
    if (promise) {
      result = BeginAwait(core, L, out);  // a Promise: the task waits for it
    } else {
      lua_settop(L, 0);
      if (!PushJsForLua(core, L, out)) result = -1;
    }
  } catch (const Napi::Error& e) {
    lua_settop(L, 0);
    PushThrown(core, L, e);
    result = -1;
  } catch (const std::exception& e) {
    lua_settop(L, 0);
    lua_pushstring(L, e.what());
    result = -1;
  }
  napi_close_handle_scope(env, scope);
  return result;
}

int l_js_call(lua_State* L) {
  LuaHost::RaiseIfClosing(L);  // a finalizer run by lua_close: the JS side is gone
  const int n = CallJs(L);
  if (n == kSuspend) return Suspend(L);
  if (n < 0) return lua_error(L);
  return n;
}

// tasks.await(v): waits for a JS Promise (v crossed as a JS value); any other
// value is returned as is, as JS await does.
int AwaitValue(lua_State* L) noexcept {
  RuntimeCore* core = CoreOf(L);
  napi_value v = JsRefValue(core, L, 1);
  bool promise = false;
  if (v != nullptr) napi_is_promise(core->env, v, &promise);
  if (!promise) {
    lua_settop(L, 1);
    return 1;
  }
  LuaHost::HostSection section(core->host.get(), L);
  napi_handle_scope scope;
  napi_open_handle_scope(core->env, &scope);
  int result;
  try {
    result = BeginAwait(core, L, v);
  } catch (const Napi::Error& e) {
    lua_settop(L, 0);
    PushThrown(core, L, e);
    result = kRaise;
  }
  napi_close_handle_scope(core->env, scope);
  return result;
}

int l_tasks_await(lua_State* L) {
  luaL_checkany(L, 1);
  LuaHost::RaiseIfClosing(L);  // a finalizer run by lua_close: the JS side is gone
  const int n = AwaitValue(L);
  if (n == kSuspend) return Suspend(L);
  if (n < 0) return lua_error(L);
  return n;
}

// __tostring / __index bodies: like CallJs, C++ only in here.
int JsToString(lua_State* L) noexcept {
  RuntimeCore* core = CoreOf(L);
  auto* box = static_cast<JsRefBox*>(lua_touserdata(L, 1));
  LuaHost::HostSection section(core->host.get(), L);
  napi_handle_scope scope;
  napi_open_handle_scope(box->env, &scope);
  napi_value v = BoxValue(box), s;
  std::string text = "JS value";
  if (napi_coerce_to_string(box->env, v, &s) == napi_ok) {
    size_t n = 0;
    napi_get_value_string_utf8(box->env, s, nullptr, 0, &n);
    text.resize(n + 1);
    napi_get_value_string_utf8(box->env, s, text.data(), n + 1, &n);
    text.resize(n);
  } else {
    napi_value ignored;
    napi_get_and_clear_last_exception(box->env, &ignored);
  }
  lua_pushlstring(L, text.data(), text.size());
  napi_close_handle_scope(box->env, scope);
  return 1;
}

int l_jsref_tostring(lua_State* L) {
  LuaHost::RaiseIfClosing(L);  // a finalizer run by lua_close: the JS side is gone
  return JsToString(L);
}

int JsIndex(lua_State* L) noexcept {
  RuntimeCore* core = CoreOf(L);
  auto* box = static_cast<JsRefBox*>(lua_touserdata(L, 1));
  LuaHost::HostSection section(core->host.get(), L);
  napi_handle_scope scope;
  napi_open_handle_scope(box->env, &scope);
  int result = 1;
  try {
    napi_value key = ToJs(core, L, 2), out;
    napi_value obj = BoxValue(box);
    napi_valuetype t;
    napi_typeof(box->env, obj, &t);
    if (t != napi_object && t != napi_function) {
      lua_pushnil(L);
    } else {
      Check(box->env, napi_get_property(box->env, obj, key, &out), "get property");
      lua_settop(L, 2);
      if (!PushJsForLua(core, L, out)) result = -1;
    }
  } catch (const Napi::Error& e) {
    lua_settop(L, 2);
    PushThrown(core, L, e);
    result = -1;
  } catch (const std::exception& e) {
    lua_settop(L, 2);
    lua_pushstring(L, e.what());
    result = -1;
  }
  napi_close_handle_scope(box->env, scope);
  return result;
}

int l_jsref_index(lua_State* L) {
  LuaHost::RaiseIfClosing(L);  // a finalizer run by lua_close: the JS side is gone
  const int n = JsIndex(L);
  if (n < 0) return lua_error(L);
  return n;
}

void NewBox(RuntimeCore* core, lua_State* L, napi_value v) {
  auto* box = static_cast<JsRefBox*>(lua_newuserdatauv(L, sizeof(JsRefBox), 0));
  box->env = core->env;
  box->ref = nullptr;
  box->boxed = false;
  luaL_setmetatable(L, kMetaName);
  napi_valuetype t;
  napi_typeof(core->env, v, &t);
  napi_value target = v;
  if (t != napi_object && t != napi_function) {
    // Node-API references hold only objects: keep a primitive in a holder,
    // so a thrown string or number still comes back to JS as itself.
    Check(core->env, napi_create_object(core->env, &target), "create holder");
    Check(core->env, napi_set_named_property(core->env, target, "v", v), "fill holder");
    box->boxed = true;
  }
  Check(core->env, napi_create_reference(core->env, target, 1, &box->ref), "create reference");
}

}  // namespace

void RegisterJsRef(RuntimeCore* core, lua_State* L) {
  static const luaL_Reg kMeta[] = {
      {"__gc", l_jsref_gc},
      {"__tostring", l_jsref_tostring},
      {"__index", l_jsref_index},
      {nullptr, nullptr},
  };
  luaL_newmetatable(L, kMetaName);
  luaL_setfuncs(L, kMeta, 0);
  lua_pushliteral(L, "JS value");
  lua_setfield(L, -2, "__name");
  lua_pushboolean(L, false);  // getmetatable() answers false: the metatable stays ours
  lua_setfield(L, -2, "__metatable");
  core->jsref_mt = lua_topointer(L, -1);
  lua_pop(L, 1);
  lua_getglobal(L, "tasks");
  if (lua_istable(L, -1)) {
    lua_pushcfunction(L, l_tasks_await);
    lua_setfield(L, -2, "await");
  }
  lua_pop(L, 1);
}

void PushJsRef(RuntimeCore* core, lua_State* L, napi_value v, bool callable) {
  NewBox(core, L, v);
  if (callable) lua_pushcclosure(L, l_js_call, 1);
}

void PushJsError(RuntimeCore* core, lua_State* L, napi_value thrown) {
  NewBox(core, L, thrown);
}

napi_value JsRefValue(RuntimeCore* core, lua_State* L, int idx) {
  JsRefBox* box = nullptr;
  if (lua_type(L, idx) == LUA_TFUNCTION) {
    if (lua_tocfunction(L, idx) != l_js_call) return nullptr;
    lua_getupvalue(L, idx, 1);
    box = ToBox(core, L, -1);
    lua_pop(L, 1);
  } else {
    box = ToBox(core, L, idx);
  }
  if (box == nullptr || box->ref == nullptr) return nullptr;
  return BoxValue(box);
}

}  // namespace lua_tasks
