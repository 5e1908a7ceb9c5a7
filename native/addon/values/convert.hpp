// SPDX-License-Identifier: MIT
// Value conversion between JS and Lua (docs/design.md#conversion): the API, the
// limits both directions keep, and how they keep them. JS -> Lua is
// js_to_lua.cpp, Lua -> JS lua_to_js.cpp, a Lua error lua_error_to_js.cpp.
//
// Both directions walk the value graph recursively with a depth limit and a
// memo, so shared references and cycles come out shared and cyclic:
//  - Lua -> JS keys the memo by lua_topointer (stable while the object lives,
//    and everything converted is reachable from the value on the stack). It
//    holds tables, Lua functions and other handles, and strings of
//    kMemoStringBytes or more: a table holding one long string many times
//    makes one JS string, not a copy per reference (a 30 MB string held
//    2,000 times made 60 GB of JS strings and V8 aborted the process).
//    Strings and handles go in only where they can repeat: inside a table, or
//    in a list of values;
//  - JS -> Lua has no identity hash in Node-API, so the memo is a JS Map from
//    the object to its index in a scratch Lua table, made only when the value
//    holds an object or a large Buffer in a table or list (numbers and strings
//    never pay for it). JS strings have no identity at all: each occurrence is
//    copied, and counted.
// Every conversion is bounded (the limits below): JS -> Lua checks the Lua
// state's size against memoryLimit and conversionLimit before each string,
// Buffer or table takes its memory and at every element, so a value past them
// is refused while it is built, not after (a 30 MB JSON text parsed into a
// value took a 64 MiB state to 1 GB for 18 s before the old after-the-fact
// check). Lua -> JS counts the bytes it produces against conversionLimit.
// Arrays are walked by index while they are dense, and by their own keys once
// a run of holes shows they are sparse, so an Array costs what it holds, not
// its length (length 2^32 - 1 hung).
// Numbers: a JS number that is integral and fits int64 becomes a Lua integer
// (except -0, which stays a float to keep its sign); a Lua integer beyond
// 2^53-1 becomes a BigInt, so no integer is ever rounded.
#pragma once

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include <napi.h>
#include <node_api.h>

#include <lua.hpp>

#include "addon/errors.hpp"

namespace lua_tasks {

// napi_values for a call's arguments or a chunk's results: on the stack for
// the usual few, on the heap past that (Lua passes up to about a million).
class ValueArray {
 public:
  explicit ValueArray(size_t n) {
    if (n > kSmall) {
      big_.resize(n);
      data_ = big_.data();
    }
  }
  ValueArray(const ValueArray&) = delete;
  ValueArray& operator=(const ValueArray&) = delete;
  napi_value* data() { return data_; }

 private:
  static constexpr size_t kSmall = 8;
  napi_value small_[kSmall];
  std::vector<napi_value> big_;
  napi_value* data_ = small_;
};

class RuntimeCore;
struct TaskTrace;

// Deepest table/object nesting either way; deeper values give ERR_CONVERSION.
// 200 keeps the recursion well inside V8's stack limit even in a Worker or an
// ASan build, where frames are several times larger.
inline constexpr int kMaxConvertDepth = 200;

// Every conversion is bounded (docs/security.md, "Conversion limits"):
//  - JS -> Lua checks memoryLimit and conversionLimit while it builds: before
//    a string, Buffer or table takes its memory, and at every element. A
//    value that would pass memoryLimit is refused with ERR_MEMORY_LIMIT, one
//    that would grow the state by more than conversionLimit with
//    ERR_CONVERSION; either way its partial copy is dropped and collected.
//  - Lua -> JS counts what it produces (string bytes, kConvertEntryBytes per
//    table entry, kConvertHandleBytes per handle of a Lua function, coroutine
//    or userdata: a JS function, its wrapper and finalizer) and refuses past
//    conversionLimit with ERR_CONVERSION, before the JS string or array is
//    made. Shared tables, functions and strings of kMemoStringBytes or more
//    convert once.
inline constexpr size_t kConvertEntryBytes = 16;
inline constexpr size_t kConvertHandleBytes = 128;
inline constexpr size_t kMemoStringBytes = 256;

// Either direction's refusal: ERR_CONVERSION with `message`.
[[noreturn]] inline void ConversionError(napi_env env, const std::string& message) {
  ThrowError(Napi::Env(env), "ERR_CONVERSION", message);
}

// Pushes the JS number `d` as Lua keeps it: an integer when it is integral,
// within int64 and not -0, else a float. Round-tripping through int64 is
// the integrality test (std::trunc was most of a call's result conversion).
inline void PushJsNumber(lua_State* L, double d) {
  if (d >= -9223372036854775808.0 && d < 9223372036854775808.0) {  // false for NaN
    const auto i = static_cast<lua_Integer>(d);
    if (static_cast<double>(i) == d && (i != 0 || !std::signbit(d))) {
      lua_pushinteger(L, i);
      return;
    }
  }
  lua_pushnumber(L, d);
}

// Pushes the Lua equivalent of `v` onto L (exactly one value). The caller is
// in a HostSection (no Lua code runs here, allocations cannot fail for the
// limit). Throws Napi::Error: ERR_CONVERSION, ERR_MEMORY_LIMIT, a RangeError
// for a BigInt outside int64, or the JS exception of a throwing getter. After
// a throw L's stack is as it was.
void PushJs(RuntimeCore* core, lua_State* L, napi_value v);

// The same for `n` values, as one conversion: a JS object given twice
// becomes one table, and conversionLimit counts them together.
void PushJsValues(RuntimeCore* core, lua_State* L, const napi_value* v, size_t n);

// For Lua code that receives a JS value (a call's result, a field, an
// awaited value): pushes it as PushJs does and returns true; if it would pass
// memoryLimit, pushes the Lua message "not enough memory: ..." instead and
// returns false (the caller raises it, as for any allocation past the limit).
// Other refusals throw as PushJs.
bool PushJsForLua(RuntimeCore* core, lua_State* L, napi_value v);
// The same for a value whose type the caller has already asked (a JS call's
// result): a number, boolean, null or undefined costs no second typeof.
bool PushJsForLua(RuntimeCore* core, lua_State* L, napi_value v, napi_valuetype type);

// Returns the JS equivalent of the Lua value at `idx`. Leaves L's stack as it
// was. Throws Napi::Error (ERR_CONVERSION) for what cannot cross.
// `handed`: Lua passes the value to JS as an argument of a call, so the Lua
// functions in it become callbacks (see WrapLuaValue).
napi_value ToJs(RuntimeCore* core, lua_State* L, int idx, bool handed = false);

// Converts the `n` values from absolute stack index `first` into out[0..n), as one
// conversion (one memo, one conversionLimit): a call's arguments or a chunk's
// results. nil becomes null when `nil_is_null` (inside an Array), else
// undefined. Leaves L's stack as it was. Returns whether all were nil,
// booleans or numbers (each made one handle, and none holds a large value).
bool ToJsValues(RuntimeCore* core, lua_State* L, int first, int n, napi_value* out, bool handed, bool nil_is_null);

// Builds the JS error for a failed load/pcall: `status` is the Lua status and
// the error value is on top of L's stack (left there). A JS value thrown
// through Lua comes back as the very same value.
// `trace` (a task's end, read off its coroutine) overrides the host's last
// recorded traceback; a memory error gets its source and line, and a JS
// value gets all three added if it has room (lib/runtime/boundary.js addWhere).
napi_value LuaErrorToJs(RuntimeCore* core, lua_State* L, int status, const TaskTrace* trace = nullptr);

// { luaStack, source, line } of `trace` (nullptr: an empty object).
Napi::Object WhereProps(Napi::Env env, const TaskTrace* trace);

}  // namespace lua_tasks
