// SPDX-License-Identifier: MIT
// JsRef: a JS value held by Lua, as a capability: a function to call, an object to read, an error value.
//
// A JsRef is a full userdata holding a strong napi_ref, of one of three kinds,
// each with its own metatable (docs/security.md has the policy):
//  - function: a JS function crosses as a C closure (l_js_call) with its box
//    as upvalue 1, so Lua calls it like any function and the converter can
//    still find the original. The box has no __index: callable, nothing more.
//    JS sees `this` as a frozen object without prototype, never globalThis.
//  - object: a by-reference object (a Date, a class instance, a Promise):
//    Lua reads its own data properties (lib/runtime/boundary.js readOwn), with
//    string or number keys only, and no code of the object runs.
//  - error: a thrown or rejected JS value, or a JS Error: message, name,
//    code and stack read as strings, tostring gives "name: message"; nothing
//    else, and never the value itself until it leaves Lua again.
// Calling into JS from Lua follows the Lua/C++ rule of this codebase: the
// lua_CFunction is a thin shell that checks its arguments; all C++ (handle
// scopes, exceptions, conversions) lives in a helper that returns a count or
// -1 with the error value pushed, and only then does the shell raise.
#include "addon/values/js_ref.hpp"

#include "core/api/lua_api_durable.hpp"
#include "core/durable/replayer.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <napi.h>

#include "addon/addon_data.hpp"
#include "addon/errors.hpp"
#include "addon/runtime/runtime_core.hpp"
#include "addon/values/convert.hpp"

namespace lua_tasks {

namespace {

enum Kind : unsigned char { kFunction = 0, kObject = 1, kError = 2 };

constexpr const char* kMetaName[] = {"lua-tasks.JsFunction", "lua-tasks.JsObject", "lua-tasks.JsError"};
constexpr const char* kTypeName[] = {"JS function", "JS object", "JS error"};  // __name: in Lua's messages

struct JsRefBox {
  napi_env env;
  napi_ref ref;  // strong; deleted by __gc
  bool boxed;    // ref holds { v: value } because value is a primitive (a thrown string, ...)
  Kind kind;
};

// The JS value a box holds, or nullptr once its reference is gone.
napi_value BoxValue(JsRefBox* box) {
  napi_value v;
  if (box->ref == nullptr || napi_get_reference_value(box->env, box->ref, &v) != napi_ok) return nullptr;
  // Refused (an exception pending, the environment going): never the holder in its place.
  if (box->boxed && napi_get_named_property(box->env, v, "v", &v) != napi_ok) return nullptr;
  return v;
}

RuntimeCore* CoreOf(lua_State* L) {
  return static_cast<RuntimeCore*>(LuaHost::From(L)->embedder);
}

JsRefBox* ToBox(RuntimeCore* core, lua_State* L, int idx) {
  if (lua_type(L, idx) != LUA_TUSERDATA || !lua_getmetatable(L, idx)) return nullptr;
  const void* mt = lua_topointer(L, -1);
  lua_pop(L, 1);
  for (const void* ours : core->jsref_mt) {
    if (mt == ours) return static_cast<JsRefBox*>(lua_touserdata(L, idx));
  }
  return nullptr;
}

int l_jsref_gc(lua_State* L) {
  auto* box = static_cast<JsRefBox*>(lua_touserdata(L, 1));
  RuntimeCore* core = CoreOf(L);
  if (core->call_cache.box == box) core->call_cache.box = nullptr;  // a new box may come at its address
  if (box->ref != nullptr) napi_delete_reference(box->env, box->ref);
  box->ref = nullptr;
  return 0;
}

// A property key from Lua: strings and numbers only, so no key object's
// toString can run (Lua code inside V8's property lookup). Raises otherwise.
void CheckKey(lua_State* L, const char* what) {
  const int t = lua_type(L, 2);
  if (t != LUA_TSTRING && t != LUA_TNUMBER) {
    luaL_error(L, "cannot index a %s with a %s key (keys must be strings or numbers)", what, luaL_typename(L, 2));
  }
}

// The JS property key for the Lua string or number at `idx`.
napi_value KeyToJs(napi_env env, lua_State* L, int idx) {
  napi_value key;
  if (lua_type(L, idx) == LUA_TNUMBER) {
    Check(env, napi_create_double(env, lua_tonumber(L, idx), &key), "key");
  } else {
    size_t n;
    const char* s = lua_tolstring(L, idx, &n);
    Check(env, napi_create_string_utf8(env, s, n, &key), "key");
  }
  return key;
}

// Calls a boundary helper (lib/runtime/boundary.js) with `argc` arguments.
napi_value CallHelper(napi_env env, const Napi::FunctionReference& fn, size_t argc, const napi_value* argv) {
  napi_value recv, out;
  napi_get_undefined(env, &recv);
  if (napi_call_function(env, recv, fn.Value(), argc, argv, &out) != napi_ok) ThrowPending(env, "a boundary helper");
  return out;
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
  napi_create_uint32(core->env, t->NewAwaitToken(), &argv[3]);
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

}  // namespace

void PushJsException(RuntimeCore* core, lua_State* L, const Napi::Error& e) noexcept {
  try {
    // Not e.Value(): it asks the value whether it has node-addon-api's
    // wrapper key, which runs a Proxy's `has` trap. The reference itself,
    // unwrapped by lib/runtime/boundary.js when it wraps a thrown primitive.
    napi_value raw = static_cast<const Napi::ObjectReference&>(e).Value();
    if (raw == nullptr) {
      lua_pushliteral(L, "a JS error without a value");
      return;
    }
    PushJsError(core, L, CallHelper(core->env, AddonData::From(core->env)->unwrap_thrown, 1, &raw));
  } catch (...) {
    // Not e.what(): it reads .message, which may be a getter.
    lua_pushliteral(L, "a JS value was thrown that could not be kept");
  }
}

void CloseCallScope(RuntimeCore* core, void* scope) {
  napi_close_handle_scope(core->env, static_cast<napi_handle_scope>(scope));
  if (core->call_cache.scope == scope) core->call_cache = {};  // another scope may come at its address
}

namespace {

// The error value for a JS exception pending on env after a failed call.
void PushPending(RuntimeCore* core, lua_State* L, const char* what) {
  napi_value exc;
  bool pending = false;
  napi_is_exception_pending(core->env, &pending);
  if (!pending || napi_get_and_clear_last_exception(core->env, &exc) != napi_ok) ThrowPending(core->env, what);
  PushJsError(core, L, exc);
}

// Calls made directly by one entry's Lua code share a handle scope
// (LuaHost::CallScope), renewed after this many: a call with only numbers,
// booleans and nil each way leaves about eight handles in it, a few KB
// together, inside one of V8's handle blocks. A call that moved anything
// else (a string or table may be large: its handle must not keep it alive
// for the calls after) closes the scope as it returns.
constexpr uint32_t kCallsPerScope = 64;

// Where a call's handles go: the entry's shared scope (`*shared` stays set),
// opened or renewed now if due, or else (*shared null) `*own`, a scope of
// the call's own. A shared scope is opened only here, where it is the
// innermost scope: what is made in it now lives as long as it, `this` for
// the JS functions Lua calls and the function of `box` (call_cache). False
// if no scope could be opened.
bool OpenCallScope(RuntimeCore* core, lua_State* L, JsRefBox* box, LuaHost::CallScope** shared,
                   napi_handle_scope* own) {
  napi_env env = core->env;
  *own = nullptr;
  LuaHost::CallScope* s = *shared;
  if (s != nullptr && s->handle != nullptr && s->calls < kCallsPerScope) return true;
  if (s == nullptr || !LuaHost::MayMoveCallScope(L)) {
    *shared = nullptr;
    return napi_open_handle_scope(env, own) == napi_ok;
  }
  if (s->handle != nullptr) CloseCallScope(core, s->handle);
  s->handle = nullptr;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return false;
  *s = {scope, 0, s->sections};
  napi_value recv, fn = BoxValue(box);
  napi_get_reference_value(env, core->receiver, &recv);
  core->call_cache = {scope, recv, fn != nullptr ? box : nullptr, fn};
  return true;
}

// Closes the call's own scope; or counts the call in the shared one, which
// closes after a call that moved more than scalars (`flat` false) if it may
// now, else at the next call that may renew it.
void EndCallScope(RuntimeCore* core, lua_State* L, LuaHost::CallScope* shared, napi_handle_scope own, bool flat) {
  if (own != nullptr) {
    napi_close_handle_scope(core->env, own);
  } else if (flat) {
    ++shared->calls;
  } else if (LuaHost::MayMoveCallScope(L)) {
    CloseCallScope(core, shared->handle);
    shared->handle = nullptr;
  } else {
    shared->calls = kCallsPerScope;
  }
}

// The body of l_js_call. Returns the number of results, or -1 with the error
// value pushed.
int CallJs(lua_State* L) noexcept {
  RuntimeCore* core = CoreOf(L);
  LuaHost* host = core->host.get();
  auto* box = static_cast<JsRefBox*>(lua_touserdata(L, lua_upvalueindex(1)));
  napi_env env = box->env;
  // Asked before the section opens: that counts as host code.
  LuaHost::CallScope* shared = host->DirectCallScope();
  LuaHost::HostSection section(host, L);
  napi_handle_scope own;
  if (!OpenCallScope(core, L, box, &shared, &own)) {
    lua_pushliteral(L, "cannot open a JS handle scope");
    return -1;
  }
  int result = 1;
  bool flat = false;  // numbers, booleans and nil only, each way
  try {
    const int argc = lua_gettop(L);
    ValueArray args(argc);
    napi_value* argv = args.data();
    flat = ToJsValues(core, L, 1, argc, argv, true, false);  // one conversion; Lua functions: callbacks
    const RuntimeCore::CallCache& cached = core->call_cache;
    const bool in_cached = shared != nullptr && cached.scope == shared->handle;
    napi_value fn = in_cached && cached.box == box ? cached.fn : BoxValue(box);
    if (fn == nullptr) throw std::runtime_error("this JS function was released");  // its __gc ran (debug library)
    // Never undefined: a sloppy-mode function would get globalThis as `this`.
    napi_value recv = cached.recv, out;
    if (!in_cached) napi_get_reference_value(env, core->receiver, &recv);
    // In the async context of the task's starter (task_context.hpp).
    if (core->contexts.Call(core->scheduler->current(), recv, fn, argc, argv, &out) != napi_ok) {
      flat = false;
      lua_settop(L, 0);
      PushPending(core, L, "calling a JS function");  // what it threw, as itself
      result = kRaise;
    } else if (double d; napi_get_value_double(env, out, &d) == napi_ok) {
      PushJsNumber(L, d);  // the usual result, with no typeof; above the arguments: the top value is returned
    } else {
      napi_valuetype type = napi_undefined;
      bool promise = false;
      napi_typeof(env, out, &type);
      flat = flat && (type == napi_boolean || type == napi_undefined || type == napi_null);
      if (type == napi_object) napi_is_promise(env, out, &promise);
      if (promise) {
        result = BeginAwait(core, L, out);  // a Promise: the task waits for it
      } else if (!PushJsForLua(core, L, out, type)) {
        result = -1;
      }
    }
  } catch (const Napi::Error& e) {
    flat = false;
    lua_settop(L, 0);
    PushJsException(core, L, e);
    result = -1;
  } catch (const std::exception& e) {
    flat = false;
    lua_settop(L, 0);
    lua_pushstring(L, e.what());
    result = -1;
  }
  EndCallScope(core, L, shared, own, flat);
  return result;
}

// The running durable task's journal, or null.
inline Journal* DurableJournal(RuntimeCore* core) {
  if (core->closed() || !core->scheduler) return nullptr;
  const Replayer* durable = core->scheduler->replayer();
  if (durable == nullptr || durable->count() == 0) return nullptr;
  Task* t = core->scheduler->current();
  Journal* j = t == nullptr ? nullptr : durable->JournalOf(t);
  return j != nullptr && j->in_step == 0 ? j : nullptr;  // inside a step, the step's record holds it
}

// Copies the JS function's own `name` (a data property: no getter runs)
// into buf, cut to kMaxIdentity bytes; 0 if it has none.
size_t OwnName(RuntimeCore* core, lua_State* L, JsRefBox* box, char (&buf)[kMaxIdentity + 1]) noexcept {
  napi_env env = core->env;
  LuaHost::HostSection section(core->host.get(), L);  // JS runs (lib/runtime/boundary.js readOwn), as in CallJs
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return 0;
  size_t len = 0;
  try {
    napi_value argv[2];
    argv[0] = BoxValue(box);
    if (argv[0] != nullptr && napi_create_string_utf8(env, "name", 4, &argv[1]) == napi_ok) {
      napi_value name = CallHelper(env, AddonData::From(env)->read_own, 2, argv);
      napi_valuetype type;
      if (napi_typeof(env, name, &type) != napi_ok || type != napi_string ||
          napi_get_value_string_utf8(env, name, buf, sizeof buf, &len) != napi_ok) {
        len = 0;
      }
    }
  } catch (...) {
    napi_value ignored;
    napi_get_and_clear_last_exception(env, &ignored);
    len = 0;
  }
  napi_close_handle_scope(env, scope);
  return len;
}

// The identity a durable task's journal gives a call of the running JS
// function: upvalue 2 of its closure, the global name rt.set gave it, else
// (set on first use) its own `name`, "" if it has none. A name, not the
// call's place in the Lua code: it stays the same when lines move, and a
// different function or another order of calls shows. Valid while the
// closure lives. May raise (memory).
std::string_view CallName(RuntimeCore* core, lua_State* L) {
  size_t len;
  const char* s = lua_tolstring(L, lua_upvalueindex(2), &len);
  if (s == nullptr) {
    char buf[kMaxIdentity + 1];
    len = OwnName(core, L, static_cast<JsRefBox*>(lua_touserdata(L, lua_upvalueindex(1))), buf);
    lua_pushlstring(L, buf, len);
    lua_replace(L, lua_upvalueindex(2));
    s = lua_tolstring(L, lua_upvalueindex(2), &len);
  }
  return {s, len};
}

int l_js_call(lua_State* L) {
  LuaHost::RaiseIfClosing(L);  // a finalizer run by lua_close: the JS side is gone
  RuntimeCore* core = CoreOf(L);
  // Taken before the call: nothing that may raise runs between the call and its record.
  std::optional<std::string_view> name;
  // A durable task's call is journaled, and replayed (lua_api_durable.hpp).
  if (Journal* j = DurableJournal(core)) {
    name = CallName(core, L);
    const int n = ReplayCall(core->scheduler.get(), j, name, L);
    if (n == -1) return lua_error(L);
    if (n != kCallLive) return n;
  }
  int n = CallJs(L);
  if (n == kSuspend) {  // a Promise: its outcome is journaled when it settles
    if (Journal* j = DurableJournal(core); j != nullptr && name) AwaitCall(j, *name);
    return Suspend(L);
  }
  if (Journal* j = DurableJournal(core)) n = JournalCall(core->scheduler.get(), j, L, n, name);
  if (n < 0) return lua_error(L);
  return n;
}

// tasks.await(v): waits for a JS Promise (v crossed as a JS value); any other
// value is returned as is, as JS await does.
int AwaitValue(lua_State* L) noexcept {
  RuntimeCore* core = CoreOf(L);
  // Only a by-reference object can be a promise to wait for: an error value
  // stays a value (a thrown promise is not awaited through it).
  JsRefBox* box = ToBox(core, L, 1);
  napi_value v = box != nullptr && box->kind == kObject ? BoxValue(box) : nullptr;
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
    PushJsException(core, L, e);
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

// Converts the JS value `v` for Lua code reading it (a field, a string of
// an error value) above `base`, or pushes why not. Returns 1 or kRaise.
int PushRead(RuntimeCore* core, lua_State* L, int base, napi_value v) {
  lua_settop(L, base);
  return PushJsForLua(core, L, v) ? 1 : kRaise;
}

// Runs `body` (which pushes one result or an error value and returns 1 or
// kRaise) in a HostSection and a handle scope, turning a C++ exception into
// an error value. For the bodies of the metamethods below.
template <typename F>
int InJs(lua_State* L, int base, F&& body) noexcept {
  RuntimeCore* core = CoreOf(L);
  napi_env env = core->env;
  LuaHost::HostSection section(core->host.get(), L);
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) {
    lua_pushliteral(L, "cannot open a JS handle scope");
    return kRaise;
  }
  int result;
  try {
    result = body(core, env);
  } catch (const Napi::Error& e) {
    lua_settop(L, base);
    PushJsException(core, L, e);
    result = kRaise;
  } catch (const std::exception& e) {
    lua_settop(L, base);
    lua_pushstring(L, e.what());
    result = kRaise;
  }
  napi_close_handle_scope(env, scope);
  return result;
}

// ---- by-reference objects

// obj[key]: an own data property (lib/runtime/boundary.js readOwn), or with
// trustedObjects the property as JS reads it.
int ObjectIndex(lua_State* L, bool trusted) noexcept {
  return InJs(L, 2, [&](RuntimeCore* core, napi_env env) {
    auto* box = static_cast<JsRefBox*>(lua_touserdata(L, 1));
    napi_value obj = BoxValue(box), out;
    if (obj == nullptr) {
      lua_pushnil(L);
      return 1;
    }
    napi_value key = KeyToJs(env, L, 2);
    if (trusted) {
      Check(env, napi_get_property(env, obj, key, &out), "get property");
    } else {
      const napi_value argv[2] = {obj, key};
      out = CallHelper(env, AddonData::From(env)->read_own, 2, argv);
    }
    return PushRead(core, L, 2, out);
  });
}

template <bool kTrusted>
int l_jsobject_index(lua_State* L) {
  LuaHost::RaiseIfClosing(L);  // a finalizer run by lua_close: the JS side is gone
  CheckKey(L, kTypeName[kObject]);
  const int n = ObjectIndex(L, kTrusted);
  if (n < 0) return lua_error(L);
  return n;
}

// tostring(obj) with trustedObjects: JS's own String(obj). (Without it, Lua's
// default "JS object: 0x..." is used: coercing would run the object's code.)
int ObjectToString(lua_State* L) noexcept {
  return InJs(L, 1, [&](RuntimeCore* core, napi_env env) {
    napi_value v = BoxValue(static_cast<JsRefBox*>(lua_touserdata(L, 1))), s;
    if (v == nullptr) {
      lua_pushliteral(L, "JS object (released)");
      return 1;
    }
    Check(env, napi_coerce_to_string(env, v, &s), "String()");
    return PushRead(core, L, 1, s);
  });
}

int l_jsobject_tostring(lua_State* L) {
  LuaHost::RaiseIfClosing(L);
  const int n = ObjectToString(L);
  if (n < 0) return lua_error(L);
  return n;
}

// ---- error values

// err.message, .name, .code, .stack (lib/runtime/boundary.js errorField); any other
// string or number key reads nil, without calling into JS.
int ErrorIndex(lua_State* L) noexcept {
  return InJs(L, 2, [&](RuntimeCore* core, napi_env env) {
    napi_value v = BoxValue(static_cast<JsRefBox*>(lua_touserdata(L, 1)));
    size_t n = 0;
    const char* k = lua_type(L, 2) == LUA_TSTRING ? lua_tolstring(L, 2, &n) : "";
    const std::string_view key(k, n);
    if (v == nullptr || (key != "message" && key != "name" && key != "code" && key != "stack")) {
      lua_pushnil(L);
      return 1;
    }
    napi_value argv[2] = {v, nullptr};
    Check(env, napi_create_string_utf8(env, k, n, &argv[1]), "key");
    return PushRead(core, L, 2, CallHelper(env, AddonData::From(env)->error_field, 2, argv));
  });
}

int l_jserror_index(lua_State* L) {
  LuaHost::RaiseIfClosing(L);
  CheckKey(L, kTypeName[kError]);
  const int n = ErrorIndex(L);
  if (n < 0) return lua_error(L);
  return n;
}

// The text of the error value at `idx` (lib/runtime/boundary.js errorText), pushed
// as a Lua string. Returns 1 or kRaise. Runs inside InJs.
int PushErrorText(RuntimeCore* core, lua_State* L, int idx, int base) {
  napi_value v = BoxValue(static_cast<JsRefBox*>(lua_touserdata(L, idx)));
  if (v == nullptr) {
    lua_settop(L, base);
    lua_pushliteral(L, "JS error (released)");
    return 1;
  }
  return PushRead(core, L, base, CallHelper(core->env, AddonData::From(core->env)->error_text, 1, &v));
}

int ErrorToString(lua_State* L) noexcept {
  return InJs(L, 1, [&](RuntimeCore* core, napi_env) { return PushErrorText(core, L, 1, 1); });
}

// Never raises: Lua's message handlers call __tostring on the way out of a
// failed call, and an error there would replace the JS error with its own.
// What could not be read (a text past memoryLimit) is said instead.
int l_jserror_tostring(lua_State* L) {
  LuaHost::RaiseIfClosing(L);
  if (ErrorToString(L) < 0 && lua_type(L, -1) != LUA_TSTRING) {
    lua_pushliteral(L, "(the text of this JS error could not be read)");
  }
  return 1;
}

// a .. b where one side is an error value: replaces it with its text, so
// `"failed: " .. err` reads as it would with a string error. Returns 2 (both
// operands are strings or numbers now) or kRaise.
int ErrorConcatOperands(lua_State* L) noexcept {
  return InJs(L, 2, [&](RuntimeCore* core, napi_env) {
    for (int i = 1; i <= 2; ++i) {
      if (ToBox(core, L, i) != nullptr) {
        if (PushErrorText(core, L, i, 2) < 0) return kRaise;
        lua_replace(L, i);
      }
    }
    return 2;
  });
}

int l_jserror_concat(lua_State* L) {
  LuaHost::RaiseIfClosing(L);
  RuntimeCore* core = CoreOf(L);
  for (int i = 1; i <= 2; ++i) {
    const int t = lua_type(L, i);
    if (t != LUA_TSTRING && t != LUA_TNUMBER && ToBox(core, L, i) == nullptr) {
      return luaL_error(L, "attempt to concatenate a %s value", luaL_typename(L, i));
    }
  }
  lua_settop(L, 2);
  if (ErrorConcatOperands(L) < 0) return lua_error(L);
  lua_concat(L, 2);  // here, not in the helper: it may raise (memory)
  return 1;
}

void NewBox(RuntimeCore* core, lua_State* L, napi_value v, Kind kind) {
  auto* box = static_cast<JsRefBox*>(lua_newuserdatauv(L, sizeof(JsRefBox), 0));
  box->env = core->env;
  box->ref = nullptr;
  box->boxed = false;
  box->kind = kind;
  luaL_setmetatable(L, kMetaName[kind]);
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

// Creates the metatable of `kind` with `funcs`; getmetatable() answers false,
// so Lua can neither see nor change it.
void NewMeta(RuntimeCore* core, lua_State* L, Kind kind, const luaL_Reg* funcs) {
  luaL_newmetatable(L, kMetaName[kind]);
  lua_pushcfunction(L, l_jsref_gc);
  lua_setfield(L, -2, "__gc");
  luaL_setfuncs(L, funcs, 0);
  lua_pushstring(L, kTypeName[kind]);
  lua_setfield(L, -2, "__name");
  lua_pushboolean(L, false);
  lua_setfield(L, -2, "__metatable");
  core->jsref_mt[kind] = lua_topointer(L, -1);
  lua_pop(L, 1);
}

}  // namespace

void RegisterJsRef(RuntimeCore* core, lua_State* L, bool trusted_objects) {
  static const luaL_Reg kNone[] = {{nullptr, nullptr}};
  static const luaL_Reg kObjectMeta[] = {{"__index", l_jsobject_index<false>}, {nullptr, nullptr}};
  static const luaL_Reg kTrustedMeta[] = {
      {"__index", l_jsobject_index<true>},
      {"__tostring", l_jsobject_tostring},
      {nullptr, nullptr},
  };
  static const luaL_Reg kErrorMeta[] = {
      {"__index", l_jserror_index},
      {"__tostring", l_jserror_tostring},
      {"__concat", l_jserror_concat},
      {nullptr, nullptr},
  };
  NewMeta(core, L, kFunction, kNone);
  NewMeta(core, L, kObject, trusted_objects ? kTrustedMeta : kObjectMeta);
  NewMeta(core, L, kError, kErrorMeta);
  lua_getglobal(L, "tasks");
  if (lua_istable(L, -1)) {
    lua_pushcfunction(L, l_tasks_await);
    lua_setfield(L, -2, "await");
  }
  lua_pop(L, 1);
}

void PushJsRef(RuntimeCore* core, lua_State* L, napi_value v, bool callable) {
  NewBox(core, L, v, callable ? kFunction : kObject);
  if (callable) {
    lua_pushnil(L);  // its name in durable journals, set by NameJsFunction or on first use (CallName)
    lua_pushcclosure(L, l_js_call, 2);
  }
}

void NameJsFunction(lua_State* L, int idx, std::string_view name) {
  if (lua_tocfunction(L, idx) != l_js_call) return;
  idx = lua_absindex(L, idx);
  lua_pushlstring(L, name.data(), std::min(name.size(), kMaxIdentity));
  lua_setupvalue(L, idx, 2);
}

void PushJsError(RuntimeCore* core, lua_State* L, napi_value thrown) {
  NewBox(core, L, thrown, kError);
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
  if (box == nullptr) return nullptr;
  return BoxValue(box);
}

napi_value JsErrorValue(RuntimeCore* core, lua_State* L, int idx) {
  JsRefBox* box = ToBox(core, L, idx);
  return box != nullptr && box->kind == kError ? BoxValue(box) : nullptr;
}

}  // namespace lua_tasks
