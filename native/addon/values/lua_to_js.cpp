// SPDX-License-Identifier: MIT
// Lua -> JS: a Lua value made into a JS value, counted against conversionLimit (convert.hpp).
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "addon/errors.hpp"
#include "addon/runtime/runtime_core.hpp"
#include "addon/values/convert.hpp"
#include "addon/values/js_ref.hpp"
#include "addon/values/lua_value.hpp"
#include "core/api/lua_list.hpp"
#include "core/base/coded_error.hpp"
#include "core/base/utf8.hpp"

namespace lua_tasks {

namespace {

constexpr double kMaxSafe = 9007199254740991.0;  // 2^53 - 1

// A Lua integer as JS has it: a number up to 2^53 - 1 either way, else a
// BigInt, so none is rounded. One that fits int32 is made as one: the same
// number, without V8's double-to-Smi check.
void IntegerToJs(napi_env env, lua_Integer i, napi_value* out) {
  if (i >= INT32_MIN && i <= INT32_MAX) {
    napi_create_int32(env, static_cast<int32_t>(i), out);
  } else if (i >= -static_cast<lua_Integer>(kMaxSafe) && i <= static_cast<lua_Integer>(kMaxSafe)) {
    napi_create_double(env, static_cast<double>(i), out);
  } else {
    napi_create_bigint_int64(env, i, out);
  }
}

// The JS value of a nil, boolean or number, or nullptr for the rest.
// Integers are asked for first: a call's arguments are mostly integers (W3),
// and lua_isinteger answers for one without lua_type.
napi_value ScalarToJs(napi_env env, lua_State* L, int idx, bool nil_is_null) {
  napi_value out;
  if (lua_isinteger(L, idx)) {
    IntegerToJs(env, lua_tointegerx(L, idx, nullptr), &out);
    return out;
  }
  switch (lua_type(L, idx)) {
    case LUA_TNIL:
    case LUA_TNONE:
      if (nil_is_null) {
        napi_get_null(env, &out);
      } else {
        napi_get_undefined(env, &out);
      }
      return out;
    case LUA_TBOOLEAN:
      napi_get_boolean(env, lua_toboolean(L, idx), &out);
      return out;
    case LUA_TNUMBER:  // a float stays a number, even when integral
      napi_create_double(env, lua_tonumberx(L, idx, nullptr), &out);
      return out;
    default:
      return nullptr;
  }
}

class LuaToJs {
 public:
  LuaToJs(RuntimeCore* core, lua_State* L, bool handed)
      : core_(core),
        env_(core->env),
        L_(L),
        handed_(handed),
        cap_(core->conversion_limit == 0 ? SIZE_MAX : core->conversion_limit) {}

  napi_value Convert(int idx) {
    if (napi_value scalar = ScalarToJs(env_, L_, idx, false)) return scalar;
    switch (lua_type(L_, idx)) {
      case LUA_TSTRING:
        return String(idx);
      case LUA_TTABLE:
        return Table(idx);
      case LUA_TFUNCTION:
      case LUA_TUSERDATA: {
        if (napi_value js = JsRefValue(core_, L_, idx)) return js;
        ErrorCode code;
        if (IsCodedError(L_, idx, &code)) return Coded(idx, code);
        return Handle(idx);
      }
      default:  // thread, light userdata
        return Handle(idx);
    }
  }

  // Converting a list of values: a string or handle may come twice even at the top.
  void set_many() { many_ = true; }

 private:
  // Counts `n` more bytes of output against conversionLimit.
  void Charge(size_t n) {
    if (n > cap_ - bytes_) TooBig(n);
    bytes_ += n;
  }

  [[noreturn]] void TooBig(size_t n) {
    ConversionError(env_, "Cannot convert a Lua value to JS: it would produce more than " + std::to_string(cap_) +
                              " bytes (conversionLimit), counting string bytes, " + std::to_string(kConvertEntryBytes) +
                              " per table entry and " + std::to_string(kConvertHandleBytes) +
                              " per function or handle, each shared one once (" + std::to_string(bytes_) +
                              " counted, " + std::to_string(n) +
                              " more needed). Return a smaller value or raise the conversionLimit option.");
  }

  // Whether a value met now may be met again in this conversion.
  bool Repeats() const { return depth_ > 0 || many_; }

  napi_value String(int idx) {
    size_t n;
    const char* s = lua_tolstring(L_, idx, &n);
    const void* p = nullptr;
    if (n >= kMemoStringBytes && Repeats()) {
      p = lua_topointer(L_, idx);
      if (auto it = seen_.find(p); it != seen_.end()) return it->second;
    }
    Charge(n);
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
    if (p != nullptr) seen_.emplace(p, out);
    return out;
  }

  // A Lua function, coroutine or userdata: a handle, one per object.
  napi_value Handle(int idx) {
    const void* p = lua_type(L_, idx) == LUA_TLIGHTUSERDATA || !Repeats() ? nullptr : lua_topointer(L_, idx);
    if (p != nullptr) {
      if (auto it = handles_.find(p); it != handles_.end()) return it->second;
    }
    Charge(kConvertHandleBytes);
    napi_value out = WrapLuaValue(core_, L_, idx, handed_);
    if (p != nullptr) handles_.emplace(p, out);
    return out;
  }

  // A coded error (a bad yield caught by pcall, returned): the error a task
  // that died of it rejects with, one per object, without a traceback.
  napi_value Coded(int idx, ErrorCode code) {
    const void* p = Repeats() ? lua_topointer(L_, idx) : nullptr;
    if (p != nullptr) {
      if (auto it = handles_.find(p); it != handles_.end()) return it->second;
    }
    const std::string_view message = CodedErrorMessage(L_, idx);
    Charge(message.size());
    napi_value out = MakeError(Napi::Env(env_), ErrorCodeName(code), std::string(message));
    if (p != nullptr) handles_.emplace(p, out);
    return out;
  }

  // A JS object key for the Lua key at `idx`.
  napi_value Key(int idx) {
    switch (lua_type(L_, idx)) {
      case LUA_TSTRING: {
        size_t n;
        const char* s = lua_tolstring(L_, idx, &n);
        const void* p = nullptr;
        if (n >= kMemoStringBytes) {
          p = lua_topointer(L_, idx);
          if (auto it = keys_.find(p); it != keys_.end()) return it->second;
        }
        Charge(n);
        napi_value out;
        if (napi_create_string_utf8(env_, s, n, &out) != napi_ok) {
          ConversionError(env_, "Cannot convert a Lua table key of " + std::to_string(n) +
                                    " bytes to JS: it is larger than a JS string can hold.");
        }
        if (p != nullptr) keys_.emplace(p, out);
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

    // A sequence exactly when every key is an integer in 1..n and there are n
    // keys; an empty table only when the Lua API marked it a list.
    const lua_Unsigned n = lua_rawlen(L_, idx);
    bool array = n > 0;
    if (n == 0 && IsMarkedList(L_, idx)) {
      lua_pushnil(L_);
      array = lua_next(L_, idx) == 0;
      if (!array) lua_pop(L_, 2);
    }
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
      // Counted before the Array is made: its length is known.
      Charge(n > SIZE_MAX / kConvertEntryBytes ? SIZE_MAX : static_cast<size_t>(n) * kConvertEntryBytes);
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
        Charge(kConvertEntryBytes);
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
  size_t cap_;   // conversionLimit, or SIZE_MAX for none
  size_t bytes_ = 0;
  bool many_ = false;
  int depth_ = 0;
  // Converted tables and long strings by address (distinct objects never
  // share one), long string keys apart (an invalid UTF-8 key is a string,
  // the same value a Buffer), and handles.
  std::unordered_map<const void*, napi_value> seen_;
  std::unordered_map<const void*, napi_value> keys_;
  std::unordered_map<const void*, napi_value> handles_;
};

}  // namespace

napi_value ToJs(RuntimeCore* core, lua_State* L, int idx, bool handed) {
  if (napi_value out = ScalarToJs(core->env, L, idx, false)) return out;
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

namespace {

// ToJsValues from `i` on, where the first value that is not a scalar is: a
// converter of its own, away from the scalars' loop (its frame is large).
[[gnu::noinline]] void ConvertFrom(RuntimeCore* core, lua_State* L, int first, int i, int n, napi_value* out,
                                   bool handed, bool nil_is_null) {
  const int top = lua_gettop(L);
  LuaToJs c(core, L, handed);
  if (n > 1) c.set_many();
  try {
    for (; i < n; ++i) {
      napi_value s = ScalarToJs(core->env, L, first + i, nil_is_null);
      out[i] = s != nullptr ? s : c.Convert(first + i);
    }
  } catch (...) {
    lua_settop(L, top);
    throw;
  }
  lua_settop(L, top);
}

}  // namespace

bool ToJsValues(RuntimeCore* core, lua_State* L, int first, int n, napi_value* out, bool handed, bool nil_is_null) {
  // Scalars first, with no converter state (a JS call's arguments are
  // mostly numbers: W3).
  for (int i = 0; i < n; ++i) {
    napi_value s = ScalarToJs(core->env, L, first + i, nil_is_null);
    if (s == nullptr) {
      ConvertFrom(core, L, first, i, n, out, handed, nil_is_null);
      return false;
    }
    out[i] = s;
  }
  return true;
}

}  // namespace lua_tasks
