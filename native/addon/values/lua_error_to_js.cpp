// SPDX-License-Identifier: MIT
// A failed Lua load or call as the JS error it rejects or throws with.
#include <cstdint>
#include <string>

#include "addon/addon_data.hpp"
#include "addon/errors.hpp"
#include "addon/runtime/runtime_core.hpp"
#include "addon/values/convert.hpp"
#include "addon/values/js_ref.hpp"
#include "core/base/coded_error.hpp"

namespace lua_tasks {

Napi::Object WhereProps(Napi::Env env, const TaskTrace* trace) {
  Napi::Object props = Napi::Object::New(env);
  if (trace == nullptr) return props;
  if (trace->traceback != nullptr) props.Set("luaStack", Napi::String::New(env, trace->traceback));
  if (trace->source != nullptr && trace->line > 0) {
    props.Set("source", Napi::String::New(env, trace->source));
    props.Set("line", Napi::Number::New(env, trace->line));
  }
  return props;
}

namespace {

// Adds where a task ended to the JS value it died of (lib/runtime/boundary.js
// addWhere: never replacing the value or its own properties).
void AddWhere(RuntimeCore* core, napi_value thrown, const TaskTrace* trace) {
  napi_env env = core->env;
  napi_value argv[2], recv, ignored;
  argv[0] = thrown;
  argv[1] = WhereProps(Napi::Env(env), trace);
  napi_get_undefined(env, &recv);
  if (napi_call_function(env, recv, AddonData::From(env)->add_where.Value(), 2, argv, &ignored) != napi_ok) {
    napi_get_and_clear_last_exception(env, &ignored);  // a note on the error: never a failure of its own
  }
}

}  // namespace

napi_value LuaErrorToJs(RuntimeCore* core, lua_State* L, int status, const TaskTrace* trace) {
  Napi::Env env(core->env);
  // A JS error (what JS threw or rejected with, or an Error) thrown through
  // Lua: the very same value, told where it ended a task if it has room. A
  // JS function or object that Lua itself throws is not one: it becomes a
  // LuaError below, with it as `value`, so JS code catching Lua's errors
  // never receives a bare function as the error.
  if (napi_value js = JsErrorValue(core, L, -1)) {
    if (trace != nullptr) AddWhere(core, js, trace);
    return js;
  }
  LuaHost* host = core->host.get();
  if (status == LUA_ERRMEM) {
    return MakeError(env, "ERR_MEMORY_LIMIT", host->MemoryErrorMessage(), WhereProps(env, trace));
  }
  if (host->last_killed() && trace == nullptr) {
    const int64_t ms = host->budget()->timeout_ns() / 1000000;
    return MakeError(env, "ERR_TASK_TIMEOUT",
                     "Lua code exceeded its CPU budget (taskTimeout " + std::to_string(ms) + " ms) and was stopped.");
  }
  Napi::Object props = Napi::Object::New(env);
  std::string message;
  if (trace != nullptr) props.Set("luaStack", Napi::String::New(env, trace->traceback));
  // A bad yield or a COMMIT that cannot be made: its own code; its message
  // names where it was raised, as a string error's does.
  ErrorCode coded;
  if (IsCodedError(L, -1, &coded)) {
    if (trace == nullptr && status == LUA_ERRRUN && !host->last_message().empty()) {
      props.Set("luaStack", Napi::String::New(env, host->last_traceback()));
    }
    return MakeError(env, ErrorCodeName(coded), std::string(CodedErrorMessage(L, -1)), props);
  }
  if (status == LUA_ERRRUN && trace == nullptr && !host->last_message().empty()) {
    message = host->last_message();
    props.Set("luaStack", Napi::String::New(env, host->last_traceback()));
  } else if (lua_type(L, -1) == LUA_TSTRING || lua_type(L, -1) == LUA_TNUMBER) {
    lua_pushvalue(L, -1);  // lua_tolstring converts a number in place: work on a copy
    size_t n;
    const char* s = lua_tolstring(L, -1, &n);
    message.assign(s, n);
    lua_pop(L, 1);
  } else if (status == LUA_ERRERR) {
    message = "error in Lua error handling";
  } else {
    message = std::string("(error object is a ") + luaL_typename(L, -1) + " value)";
  }
  if (lua_type(L, -1) != LUA_TSTRING) {
    try {
      props.Set("value", ToJs(core, L, -1));
    } catch (const Napi::Error&) {
      // The value cannot cross (e.g. a table with a table key); the message stays.
    }
  }
  const char* code = status == LUA_ERRSYNTAX ? "ERR_LUA_SYNTAX" : "ERR_LUA_RUNTIME";
  return MakeError(env, code, message, props);
}

}  // namespace lua_tasks
