// SPDX-License-Identifier: MIT
// Value conversion between JS and Lua (DESIGN §5).
//
// Both directions walk the value graph recursively with a depth limit and a
// memo, so shared references and cycles come out shared and cyclic:
//  - Lua -> JS keys the memo by lua_topointer (stable while the table lives,
//    and the table is on the stack while we convert it);
//  - JS -> Lua has no identity hash in Node-API, so the memo is a JS Map from
//    the object to its index in a scratch Lua table, made only when the value
//    holds an object at all (numbers and strings never pay for it).
// Numbers: a JS number that is integral and fits int64 becomes a Lua integer
// (except -0, which stays a float to keep its sign); a Lua integer beyond
// 2^53-1 becomes a BigInt, so no integer is ever rounded.
#include "convert.hpp"

#include <cmath>
#include <cstring>
#include <string>
#include <unordered_map>

#include "addon_data.hpp"
#include "errors.hpp"
#include "js_ref.hpp"
#include "lua_value.hpp"
#include "runtime_core.hpp"
#include "utf8.hpp"

namespace lua_tasks {

namespace {

constexpr double kMaxSafe = 9007199254740991.0;  // 2^53 - 1

[[noreturn]] void ConversionError(napi_env env, const std::string& msg) {
  ThrowError(Napi::Env(env), "ERR_CONVERSION", msg);
}

std::string Describe(napi_env env, napi_value v) {
  napi_value s;
  bool pending = false;
  if (napi_coerce_to_string(env, v, &s) != napi_ok) {
    napi_is_exception_pending(env, &pending);
    if (pending) {
      napi_value ignored;
      napi_get_and_clear_last_exception(env, &ignored);
    }
    return "value";
  }
  char buf[64];
  size_t n = 0;
  napi_get_value_string_utf8(env, s, buf, sizeof buf, &n);
  return std::string(buf, n);
}

// ---- JS -> Lua ---------------------------------------------------------------

class JsToLua {
 public:
  JsToLua(RuntimeCore* core, lua_State* L) : core_(core), env_(core->env), L_(L) {}

  void Push(napi_value v) {
    napi_valuetype t;
    Check(env_, napi_typeof(env_, v, &t), "typeof");
    switch (t) {
      case napi_undefined:
      case napi_null:
        lua_pushnil(L_);
        return;
      case napi_boolean: {
        bool b;
        Check(env_, napi_get_value_bool(env_, v, &b), "get boolean");
        lua_pushboolean(L_, b);
        return;
      }
      case napi_number: {
        double d;
        Check(env_, napi_get_value_double(env_, v, &d), "get number");
        PushNumber(d);
        return;
      }
      case napi_bigint: {
        int64_t i;
        bool lossless;
        Check(env_, napi_get_value_bigint_int64(env_, v, &i, &lossless), "get bigint");
        if (!lossless) {
          ThrowError(Napi::Env(env_), "ERR_OUT_OF_RANGE",
                     "BigInt " + Describe(env_, v) +
                         " is outside the range of a Lua integer (-9223372036854775808 to "
                         "9223372036854775807).");
        }
        lua_pushinteger(L_, i);
        return;
      }
      case napi_string:
        PushString(v);
        return;
      case napi_symbol:
        ConversionError(env_, "Cannot convert " + DescribeSymbol(v) + " to Lua: symbols have no Lua equivalent.");
      case napi_function:
        if (PushLuaValue(core_, L_, v)) return;
        PushJsRef(core_, L_, v, true);
        return;
      case napi_object:
      case napi_external:
        PushObject(v);
        return;
    }
  }

  ~JsToLua() {
    if (memo_ != nullptr) napi_delete_reference(env_, memo_);
  }

 private:
  void PushNumber(double d) {
    // Integral, in int64 range, and not -0.
    if (d >= -9223372036854775808.0 && d < 9223372036854775808.0 && std::trunc(d) == d &&
        !(d == 0 && std::signbit(d))) {
      lua_pushinteger(L_, static_cast<lua_Integer>(d));
    } else {
      lua_pushnumber(L_, d);
    }
  }

  void PushString(napi_value v) {
    std::string& buf = core_->scratch;
    size_t len = 0;
    if (buf.size() < 256) buf.resize(256);
    // First try into the reusable buffer; most strings fit.
    Check(env_, napi_get_value_string_utf8(env_, v, buf.data(), buf.size(), &len), "get string");
    if (len + 1 >= buf.size()) {
      Check(env_, napi_get_value_string_utf8(env_, v, nullptr, 0, &len), "get string");
      buf.resize(len + 1);
      Check(env_, napi_get_value_string_utf8(env_, v, buf.data(), buf.size(), &len), "get string");
    }
    lua_pushlstring(L_, buf.data(), len);
  }

  std::string DescribeSymbol(napi_value v) {
    napi_value global, str, fn, out;
    napi_get_global(env_, &global);
    napi_get_named_property(env_, global, "String", &str);
    fn = str;
    if (napi_call_function(env_, global, fn, 1, &v, &out) != napi_ok) return "a Symbol";
    char buf[80];
    size_t n = 0;
    napi_get_value_string_utf8(env_, out, buf, sizeof buf, &n);
    return std::string(buf, n);
  }

  void PushObject(napi_value v) {
    if (PushLuaValue(core_, L_, v)) return;
    bool is;
    Check(env_, napi_is_typedarray(env_, v, &is), "is typedarray");
    if (is) {
      napi_typedarray_type type;
      size_t length;
      void* data;
      Check(env_, napi_get_typedarray_info(env_, v, &type, &length, &data, nullptr, nullptr), "typedarray info");
      if (type == napi_uint8_array) {
        lua_pushlstring(L_, static_cast<const char*>(data), length);
        return;
      }
      PushJsRef(core_, L_, v, false);
      return;
    }
    Check(env_, napi_is_arraybuffer(env_, v, &is), "is arraybuffer");
    if (is) {
      void* data;
      size_t length;
      Check(env_, napi_get_arraybuffer_info(env_, v, &data, &length), "arraybuffer info");
      lua_pushlstring(L_, static_cast<const char*>(data), length);
      return;
    }
    Check(env_, napi_is_array(env_, v, &is), "is array");
    if (is) {
      PushArray(v);
      return;
    }
    // What Lua may see of it, decided in JS without running any of its code
    // (lib/boundary.js classify): a Proxy's traps, a getter for
    // Symbol.toStringTag, a getPrototypeOf trap never run here.
    AddonData* data = AddonData::From(env_);
    napi_value kind_v, recv;
    napi_get_undefined(env_, &recv);
    if (napi_call_function(env_, recv, data->classify.Value(), 1, &v, &kind_v) != napi_ok) {
      ThrowPending(env_, "classifying a JS object");
    }
    int32_t kind = 2;
    napi_get_value_int32(env_, kind_v, &kind);
    switch (kind) {
      case 0:  // plain: copied
        PushPlainObject(v);
        return;
      case 1:  // a Map: copied
        PushMap(v);
        return;
      case 3:  // a JS Error: an error value (message, name, code, stack), the same Error back in JS
        PushJsError(core_, L_, v);
        return;
      default:
        // Promises, dates, class instances, Proxies: kept by reference, so
        // they come back to JS as the same object; Lua reads own data
        // properties only (none of a Proxy).
        PushJsRef(core_, L_, v, false);
        return;
    }
  }

  // If `v` was converted already, pushes its table and returns true; else
  // records the table on top of the stack as its conversion.
  bool Memo(napi_value v) {
    AddonData* data = AddonData::From(env_);
    napi_value map;
    if (memo_ == nullptr) {
      Check(env_, napi_new_instance(env_, data->map_ctor.Value(), 0, nullptr, &map), "new Map");
      Check(env_, napi_create_reference(env_, map, 1, &memo_), "reference");
      lua_createtable(L_, 4, 0);
      memo_table_ = luaL_ref(L_, LUA_REGISTRYINDEX);
    } else {
      Check(env_, napi_get_reference_value(env_, memo_, &map), "reference value");
    }
    napi_value found;
    Check(env_, napi_call_function(env_, map, data->map_get.Value(), 1, &v, &found), "Map.get");
    napi_valuetype t;
    napi_typeof(env_, found, &t);
    if (t == napi_number) {
      int64_t i;
      napi_get_value_int64(env_, found, &i);
      lua_rawgeti(L_, LUA_REGISTRYINDEX, memo_table_);
      lua_rawgeti(L_, -1, i);
      lua_remove(L_, -2);
      return true;
    }
    return false;
  }

  void Remember(napi_value v) {
    // Stack: [..., table]
    AddonData* data = AddonData::From(env_);
    napi_value map, idx, args[2], ignored;
    Check(env_, napi_get_reference_value(env_, memo_, &map), "reference value");
    ++memo_count_;
    lua_rawgeti(L_, LUA_REGISTRYINDEX, memo_table_);
    lua_pushvalue(L_, -2);
    lua_rawseti(L_, -2, memo_count_);
    lua_pop(L_, 1);
    napi_create_int64(env_, memo_count_, &idx);
    args[0] = v;
    args[1] = idx;
    Check(env_, napi_call_function(env_, map, data->map_set.Value(), 2, args, &ignored), "Map.set");
  }

  void Enter() {
    if (++depth_ > kMaxConvertDepth) {
      ConversionError(env_, "Cannot convert value to Lua: it is nested more than " + std::to_string(kMaxConvertDepth) +
                                " levels deep.");
    }
    if (!lua_checkstack(L_, 4)) ConversionError(env_, "Cannot convert value to Lua: Lua stack overflow.");
  }

  void PushArray(napi_value v) {
    if (Memo(v)) return;
    Enter();
    uint32_t n;
    Check(env_, napi_get_array_length(env_, v, &n), "array length");
    lua_createtable(L_, static_cast<int>(n), 0);
    Remember(v);
    for (uint32_t i = 0; i < n; ++i) {
      napi_value e;
      Check(env_, napi_get_element(env_, v, i, &e), "get element");
      Push(e);
      lua_rawseti(L_, -2, static_cast<lua_Integer>(i) + 1);
    }
    --depth_;
  }

  void PushPlainObject(napi_value v) {
    if (Memo(v)) return;
    Enter();
    napi_value keys;
    Check(env_,
          napi_get_all_property_names(env_, v, napi_key_own_only,
                                      static_cast<napi_key_filter>(napi_key_enumerable | napi_key_skip_symbols),
                                      napi_key_numbers_to_strings, &keys),
          "property names");
    uint32_t n;
    Check(env_, napi_get_array_length(env_, keys, &n), "keys length");
    lua_createtable(L_, 0, static_cast<int>(n));
    Remember(v);
    for (uint32_t i = 0; i < n; ++i) {
      napi_value k, e;
      Check(env_, napi_get_element(env_, keys, i, &k), "get key");
      Check(env_, napi_get_property(env_, v, k, &e), "get property");  // a getter may throw
      PushString(k);
      Push(e);
      lua_rawset(L_, -3);
    }
    --depth_;
  }

  void PushMap(napi_value v) {
    if (Memo(v)) return;
    Enter();
    AddonData* data = AddonData::From(env_);
    napi_value pairs, global;
    napi_get_global(env_, &global);
    Check(env_, napi_call_function(env_, global, data->array_from.Value(), 1, &v, &pairs), "Array.from");
    uint32_t n;
    Check(env_, napi_get_array_length(env_, pairs, &n), "pairs length");
    lua_createtable(L_, 0, static_cast<int>(n));
    Remember(v);
    for (uint32_t i = 0; i < n; ++i) {
      napi_value pair, k, e;
      Check(env_, napi_get_element(env_, pairs, i, &pair), "get pair");
      Check(env_, napi_get_element(env_, pair, 0, &k), "get key");
      Check(env_, napi_get_element(env_, pair, 1, &e), "get value");
      Push(k);
      if (lua_isnil(L_, -1) || (lua_type(L_, -1) == LUA_TNUMBER && lua_tonumber(L_, -1) != lua_tonumber(L_, -1))) {
        ConversionError(env_, "Cannot convert Map to Lua: key " + Describe(env_, k) +
                                  " cannot be a Lua table key (nil and NaN are not allowed).");
      }
      Push(e);
      lua_rawset(L_, -3);
    }
    --depth_;
  }

  RuntimeCore* core_;
  napi_env env_;
  lua_State* L_;
  int depth_ = 0;
  napi_ref memo_ = nullptr;  // JS Map: object -> index in memo_table_
  int memo_table_ = LUA_NOREF;
  int memo_count_ = 0;

 public:
  void Finish() {
    if (memo_table_ != LUA_NOREF) luaL_unref(L_, LUA_REGISTRYINDEX, memo_table_);
    memo_table_ = LUA_NOREF;
  }
};

// ---- Lua -> JS ---------------------------------------------------------------

class LuaToJs {
 public:
  LuaToJs(RuntimeCore* core, lua_State* L, bool handed) : core_(core), env_(core->env), L_(L), handed_(handed) {}

  napi_value Convert(int idx) {
    napi_value out;
    switch (lua_type(L_, idx)) {
      case LUA_TNIL:
      case LUA_TNONE:
        napi_get_undefined(env_, &out);
        return out;
      case LUA_TBOOLEAN:
        napi_get_boolean(env_, lua_toboolean(L_, idx), &out);
        return out;
      case LUA_TNUMBER:
        if (lua_isinteger(L_, idx)) {
          const lua_Integer i = lua_tointeger(L_, idx);
          if (i >= -static_cast<lua_Integer>(kMaxSafe) && i <= static_cast<lua_Integer>(kMaxSafe)) {
            napi_create_double(env_, static_cast<double>(i), &out);
          } else {
            napi_create_bigint_int64(env_, i, &out);
          }
        } else {
          napi_create_double(env_, lua_tonumber(L_, idx), &out);
        }
        return out;
      case LUA_TSTRING:
        return String(idx);
      case LUA_TTABLE:
        return Table(idx);
      case LUA_TFUNCTION:
      case LUA_TUSERDATA:
        if (napi_value js = JsRefValue(core_, L_, idx)) return js;
        return WrapLuaValue(core_, L_, idx, handed_);
      default:  // thread, light userdata
        return WrapLuaValue(core_, L_, idx, handed_);
    }
  }

 private:
  napi_value String(int idx) {
    size_t n;
    const char* s = lua_tolstring(L_, idx, &n);
    napi_value out;
    napi_status st;
    if (IsAscii(s, n)) {
      st = napi_create_string_latin1(env_, s, n, &out);
    } else if (IsValidUtf8(s, n)) {
      st = napi_create_string_utf8(env_, s, n, &out);
    } else {
      void* ignored;
      st = napi_create_buffer_copy(env_, n, s, &ignored, &out);  // bytes, losslessly
    }
    if (st != napi_ok) {
      ConversionError(env_, "Cannot convert a Lua string of " + std::to_string(n) +
                                " bytes to JS: it is larger than a JS string or Buffer can hold.");
    }
    return out;
  }

  // A JS object key for the Lua key at `idx`.
  napi_value Key(int idx) {
    switch (lua_type(L_, idx)) {
      case LUA_TSTRING: {
        size_t n;
        const char* s = lua_tolstring(L_, idx, &n);
        napi_value out;
        Check(env_, napi_create_string_utf8(env_, s, n, &out), "key");
        return out;
      }
      case LUA_TNUMBER:
      case LUA_TBOOLEAN: {
        napi_value v = Convert(idx), out;
        Check(env_, napi_coerce_to_string(env_, v, &out), "key");
        return out;
      }
      default:
        ConversionError(env_, std::string("Cannot convert a Lua table to JS: a key of type ") + luaL_typename(L_, idx) +
                                  " cannot be an object key (keys may be strings, numbers or booleans).");
    }
  }

  napi_value Table(int idx) {
    idx = lua_absindex(L_, idx);
    const void* p = lua_topointer(L_, idx);
    if (auto it = seen_.find(p); it != seen_.end()) return it->second;
    if (++depth_ > kMaxConvertDepth) {
      ConversionError(env_, "Cannot convert a Lua table to JS: it is nested more than " +
                                std::to_string(kMaxConvertDepth) + " levels deep.");
    }
    if (!lua_checkstack(L_, 4)) ConversionError(env_, "Cannot convert a Lua table to JS: Lua stack overflow.");

    // A sequence exactly when every key is an integer in 1..n and there are n keys.
    const lua_Unsigned n = lua_rawlen(L_, idx);
    bool array = n > 0;
    if (array) {
      lua_Unsigned count = 0;
      lua_pushnil(L_);
      while (lua_next(L_, idx) != 0) {
        lua_pop(L_, 1);
        ++count;
        if (!lua_isinteger(L_, -1)) {
          array = false;
        } else {
          const lua_Integer k = lua_tointeger(L_, -1);
          if (k < 1 || static_cast<lua_Unsigned>(k) > n) array = false;
        }
        if (!array) {
          lua_pop(L_, 1);
          break;
        }
      }
      if (count != n) array = false;
    }

    napi_value out;
    if (array) {
      if (n > 0xFFFFFFFEu) ConversionError(env_, "Cannot convert a Lua sequence to JS: too long for an Array.");
      Check(env_, napi_create_array_with_length(env_, n, &out), "create array");
      seen_.emplace(p, out);
      for (lua_Unsigned i = 1; i <= n; ++i) {
        lua_rawgeti(L_, idx, static_cast<lua_Integer>(i));
        napi_value e = Convert(-1);
        lua_pop(L_, 1);
        Check(env_, napi_set_element(env_, out, static_cast<uint32_t>(i - 1), e), "set element");
      }
    } else {
      Check(env_, napi_create_object(env_, &out), "create object");
      seen_.emplace(p, out);
      lua_pushnil(L_);
      while (lua_next(L_, idx) != 0) {
        napi_value k = Key(-2);
        napi_value e = Convert(-1);
        lua_pop(L_, 1);
        // define, not set: a key named "__proto__" must not change the prototype.
        napi_property_descriptor d{
            nullptr,
            k,
            nullptr,
            nullptr,
            nullptr,
            e,
            static_cast<napi_property_attributes>(napi_writable | napi_enumerable | napi_configurable),
            nullptr};
        Check(env_, napi_define_properties(env_, out, 1, &d), "define property");
      }
    }
    --depth_;
    return out;
  }

  RuntimeCore* core_;
  napi_env env_;
  lua_State* L_;
  bool handed_;  // Lua functions become callbacks
  int depth_ = 0;
  std::unordered_map<const void*, napi_value> seen_;
};

}  // namespace

void PushJs(RuntimeCore* core, lua_State* L, napi_value v) {
  // Fast path for the scalars most calls carry: no converter state needed.
  napi_env env = core->env;
  napi_valuetype t;
  if (napi_typeof(env, v, &t) == napi_ok) {
    if (t == napi_number) {
      double d;
      napi_get_value_double(env, v, &d);
      if (d >= -9223372036854775808.0 && d < 9223372036854775808.0 && std::trunc(d) == d &&
          !(d == 0 && std::signbit(d))) {
        lua_pushinteger(L, static_cast<lua_Integer>(d));
      } else {
        lua_pushnumber(L, d);
      }
      return;
    }
    if (t == napi_undefined || t == napi_null) {
      lua_pushnil(L);
      return;
    }
    if (t == napi_boolean) {
      bool b;
      napi_get_value_bool(env, v, &b);
      lua_pushboolean(L, b);
      return;
    }
  }
  JsToLua c(core, L);
  try {
    c.Push(v);
  } catch (...) {
    c.Finish();
    throw;
  }
  c.Finish();
}

napi_value ToJs(RuntimeCore* core, lua_State* L, int idx, bool handed) {
  napi_value out;
  switch (lua_type(L, idx)) {  // scalars need no converter state
    case LUA_TNIL:
    case LUA_TNONE:
      napi_get_undefined(core->env, &out);
      return out;
    case LUA_TBOOLEAN:
      napi_get_boolean(core->env, lua_toboolean(L, idx), &out);
      return out;
    case LUA_TNUMBER: {
      if (!lua_isinteger(L, idx)) {  // a float stays a number, even when integral
        napi_create_double(core->env, lua_tonumber(L, idx), &out);
        return out;
      }
      const lua_Integer i = lua_tointeger(L, idx);
      if (i >= -static_cast<lua_Integer>(kMaxSafe) && i <= static_cast<lua_Integer>(kMaxSafe)) {
        napi_create_double(core->env, static_cast<double>(i), &out);
      } else {
        napi_create_bigint_int64(core->env, i, &out);
      }
      return out;
    }
    default:
      break;
  }
  const int top = lua_gettop(L);
  LuaToJs c(core, L, handed);
  try {
    napi_value v = c.Convert(idx);
    lua_settop(L, top);
    return v;
  } catch (...) {
    lua_settop(L, top);
    throw;
  }
}

napi_value LuaErrorToJs(RuntimeCore* core, lua_State* L, int status, const char* traceback) {
  Napi::Env env(core->env);
  // A JS error (what JS threw or rejected with, or an Error) thrown through
  // Lua: the very same value. A JS function or object that Lua itself throws
  // is not one: it becomes a LuaError below, with it as `value`, so JS code
  // catching Lua's errors never receives a bare function as the error.
  if (napi_value js = JsErrorValue(core, L, -1)) return js;
  LuaHost* host = core->host.get();
  if (status == LUA_ERRMEM) return MakeError(env, "ERR_MEMORY_LIMIT", host->MemoryErrorMessage());
  if (host->last_killed() && traceback == nullptr) {
    const int64_t ms = host->budget()->timeout_ns() / 1000000;
    return MakeError(env, "ERR_TASK_TIMEOUT",
                     "Lua code exceeded its CPU budget (taskTimeout " + std::to_string(ms) + " ms) and was stopped.");
  }
  Napi::Object props = Napi::Object::New(env);
  std::string message;
  if (traceback != nullptr) props.Set("luaStack", Napi::String::New(env, traceback));
  if (status == LUA_ERRRUN && traceback == nullptr && !host->last_message().empty()) {
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
