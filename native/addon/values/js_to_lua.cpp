// SPDX-License-Identifier: MIT
// JS -> Lua: a JS value built as a Lua value, within the limits (convert.hpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "addon/addon_data.hpp"
#include "addon/errors.hpp"
#include "addon/runtime/runtime_core.hpp"
#include "addon/values/convert.hpp"
#include "addon/values/js_ref.hpp"
#include "addon/values/lua_value.hpp"

namespace lua_tasks {

namespace {

// What Lua 5.4 allocates (64-bit): an array slot (TValue), a hash node, a
// table, a string's header. Used to check a table or string against the
// limits before Lua allocates it; the check at the next element sees the
// real count, so an estimate off by a little costs a little overshoot.
constexpr size_t kLuaSlot = 16;
constexpr size_t kLuaNode = 24;
constexpr size_t kLuaTable = 56;
constexpr size_t kLuaString = 25;

// Slots an Array's table gets up front: its length says nothing about what
// it holds (a sparse Array of length 1e8 made a 1.6 GB table). Dense Arrays
// grow from there as Lua tables do, by doubling.
constexpr uint32_t kArrayPrealloc = 1024;
// This many missing elements in a row and an Array is walked by its own keys.
constexpr uint32_t kHoleRun = 64;
// The reusable string buffer keeps at most this much between conversions.
constexpr size_t kScratchMax = size_t{64} << 10;
// JS -> Lua: Buffers this large convert once per conversion (a Map lookup).
constexpr size_t kMemoBufferBytes = 1024;
// Values (key, value, ...) fetched per call of the Map helper.
constexpr uint32_t kMapChunk = 512;

size_t SatAdd(size_t a, size_t b) {
  return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

// Bytes of a hash part for n keys (Lua rounds it up to a power of two).
size_t HashBytes(size_t n) {
  size_t p = 1;
  while (p < n) p <<= 1;
  return n == 0 ? 0 : p * kLuaNode;
}

// Drops an exception a failed description left pending: it is not the
// conversion's error, and would refuse every later Node-API call.
void DropPending(napi_env env) {
  bool pending = false;
  napi_is_exception_pending(env, &pending);
  if (pending) {
    napi_value ignored;
    napi_get_and_clear_last_exception(env, &ignored);
  }
}

std::string Describe(napi_env env, napi_value v) {
  napi_value s;
  if (napi_coerce_to_string(env, v, &s) != napi_ok) {
    DropPending(env);
    return "value";
  }
  char buf[64];
  size_t n = 0;
  napi_get_value_string_utf8(env, s, buf, sizeof buf, &n);
  return std::string(buf, n);
}

// What a refusal names: "a string of 31457280 bytes", "an Array of length 2".
enum class What { kValue, kString, kBuffer, kArray, kObject, kMap };

std::string Name(What what, size_t count) {
  const std::string n = std::to_string(count);
  switch (what) {
    case What::kString:
      return "a string of " + n + " bytes";
    case What::kBuffer:
      return "a Buffer of " + n + " bytes";
    case What::kArray:
      return "an Array of length " + n;
    case What::kObject:
      return "an object of " + n + " keys";
    case What::kMap:
      return "a Map of " + n + " entries";
    case What::kValue:
      break;
  }
  return "the value";
}

// Thrown inside the converter when a value would pass memoryLimit: PushJs
// makes it ERR_MEMORY_LIMIT, PushJsForLua a Lua memory error. It never leaves
// this file (nothing but our own frames lies between throw and catch: a
// getter's nested conversion has its own catch).
struct MemoryRefused {
  size_t would;   // bytes the state would hold
  size_t limit;   // memoryLimit
  size_t before;  // bytes it held when the conversion began
  std::string what;
};

class JsToLua {
 public:
  JsToLua(RuntimeCore* core, lua_State* L)
      : core_(core), env_(core->env), L_(L), mem_(&core->host->memory()), before_(mem_->used) {
    // A state already past memoryLimit (values held from earlier) may still
    // take small values, such as the nil that frees them, but cannot grow.
    if (mem_->limit != 0) ceiling_ = std::max(mem_->limit, before_);
    if (core->conversion_limit != 0) ceiling_ = std::min(ceiling_, SatAdd(before_, core->conversion_limit));
  }
  ~JsToLua() {
    if (memo_ != nullptr) napi_delete_reference(env_, memo_);
  }
  JsToLua(const JsToLua&) = delete;
  JsToLua& operator=(const JsToLua&) = delete;

  void Push(napi_value v) {
    napi_valuetype t;
    Check(env_, napi_typeof(env_, v, &t), "typeof");
    PushTyped(v, t);
  }

  // Drops the memo's scratch table (the values stay where they were put).
  void Finish() {
    if (memo_table_ != LUA_NOREF) luaL_unref(L_, LUA_REGISTRYINDEX, memo_table_);
    memo_table_ = LUA_NOREF;
  }

  // A size refusal happened: the partial value is worth collecting now.
  bool refused() const { return refused_; }

  // Converting a list of values: a Buffer may come twice even at the top.
  void set_many() { many_ = true; }

 private:
  void PushTyped(napi_value v, napi_valuetype t) {
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
        PushJsNumber(L_, d);
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

  // Throws unless the state can grow by `more` bytes: past memoryLimit a
  // MemoryRefused, past conversionLimit ERR_CONVERSION. One load and one
  // compare when it fits, so it runs at every element.
  void Reserve(size_t more, What what = What::kValue, size_t count = 0) {
    const size_t used = mem_->used;
    if (more <= ceiling_ && used <= ceiling_ - more) return;
    Refuse(SatAdd(used, more), what, count);
  }

  bool Fits(size_t more) const { return more <= ceiling_ && mem_->used <= ceiling_ - more; }

  [[noreturn]] void Refuse(size_t would, What what, size_t count) {
    refused_ = true;
    if (mem_->limit != 0 && would > std::max(mem_->limit, before_)) {
      throw MemoryRefused{would, mem_->limit, before_, Name(what, count)};
    }
    ConversionError(env_, "Cannot convert the value to Lua: it would grow the Lua state by " +
                              std::to_string(would - before_) + " bytes, past conversionLimit " +
                              std::to_string(core_->conversion_limit) + " (refused at " + Name(what, count) +
                              "). Pass a smaller value or raise the conversionLimit option.");
  }

  void PushString(napi_value v) {
    std::string& buf = core_->scratch;
    size_t len = 0;
    if (buf.size() < 256) buf.resize(256);
    // First try into the reusable buffer; most strings fit. Node-API copies
    // whole characters only (up to 4 bytes each): a length within 4 bytes of
    // the end may have stopped short (taking it as complete cut 'é'.repeat(200)
    // to 254 bytes), so the real length decides.
    Check(env_, napi_get_value_string_utf8(env_, v, buf.data(), buf.size(), &len), "get string");
    if (len + 4 < buf.size()) {
      lua_pushlstring(L_, buf.data(), len);
      return;
    }
    // Its UTF-8 size, then the check, before anything that size is made.
    const size_t copied = len;
    Check(env_, napi_get_value_string_utf8(env_, v, nullptr, 0, &len), "get string");
    if (len == copied) {
      lua_pushlstring(L_, buf.data(), len);
      return;
    }
    Reserve(SatAdd(len, kLuaString), What::kString, len);
    if (len < kScratchMax) {
      buf.resize(len + 1);
      Check(env_, napi_get_value_string_utf8(env_, v, buf.data(), buf.size(), &len), "get string");
      lua_pushlstring(L_, buf.data(), len);
      return;
    }
    // A large string's buffer lives only while it is copied.
    auto big = std::make_unique_for_overwrite<char[]>(len + 1);
    Check(env_, napi_get_value_string_utf8(env_, v, big.get(), len + 1, &len), "get string");
    lua_pushlstring(L_, big.get(), len);
  }

  // Bytes of a Buffer, Uint8Array or ArrayBuffer: copied into a Lua string
  // (Lua strings cannot share JS memory), so checked against the limits first.
  void PushBytes(napi_value v, const void* data, size_t length) {
    const bool memo = length >= kMemoBufferBytes && (depth_ > 0 || many_);  // else it cannot come twice
    if (memo && Memo(v)) return;
    Reserve(SatAdd(length, kLuaString), What::kBuffer, length);
    lua_pushlstring(L_, static_cast<const char*>(data), length);
    if (memo) Remember(v);
  }

  std::string DescribeSymbol(napi_value v) {
    napi_value global, str, out;
    char buf[80];
    size_t n = 0;
    // String(v), which JS code may have replaced by one that throws or gives no string.
    if (napi_get_global(env_, &global) != napi_ok || napi_get_named_property(env_, global, "String", &str) != napi_ok ||
        napi_call_function(env_, global, str, 1, &v, &out) != napi_ok ||
        napi_get_value_string_utf8(env_, out, buf, sizeof buf, &n) != napi_ok) {
      DropPending(env_);
      return "a Symbol";
    }
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
        PushBytes(v, data, length);
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
      PushBytes(v, data, length);
      return;
    }
    Check(env_, napi_is_array(env_, v, &is), "is array");
    if (is) {
      PushArray(v);
      return;
    }
    // What Lua may see of it, decided in JS without running any of its code
    // (lib/runtime/boundary.js classify): a Proxy's traps, a getter for
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
      case 1:  // a Map: copied, entry by entry
        PushMap(v, MapSize(v));
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

  // The size of a Map (classify said it is one: util.types.isMap), read with
  // Map.prototype's own size getter, so no getter of the Map runs.
  size_t MapSize(napi_value v) {
    AddonData* data = AddonData::From(env_);
    napi_value global, size;
    napi_get_global(env_, &global);
    Check(env_, napi_call_function(env_, global, data->map_size.Value(), 1, &v, &size), "Map size");
    int64_t out = 0;
    napi_get_value_int64(env_, size, &out);
    return out > 0 ? static_cast<size_t>(out) : 0;
  }

  // If `v` was converted already, pushes its value and returns true; else
  // the caller pushes it and calls Remember.
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
    // Stack: [..., value]
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

  static bool Missing(napi_valuetype t) { return t == napi_undefined || t == napi_null; }

  void PushArray(napi_value v) {
    if (Memo(v)) return;
    Enter();
    uint32_t n;
    Check(env_, napi_get_array_length(env_, v, &n), "array length");
    uint32_t pre = std::min(n, kArrayPrealloc);
    if (n > pre && LooksDense(v, n) && Fits(kLuaTable + size_t{n} * kLuaSlot)) pre = n;  // no doubling: 15% faster
    Reserve(kLuaTable + size_t{pre} * kLuaSlot, What::kArray, n);
    lua_createtable(L_, static_cast<int>(pre), 0);
    Remember(v);
    uint32_t run = 0;
    for (uint32_t i = 0; i < n; ++i) {
      // Past the part made up front, Lua doubles the table when key i + 1
      // (i a power of two) arrives: i more slots.
      Reserve(i >= pre && (i & (i - 1)) == 0 ? size_t{i} * kLuaSlot : kLuaSlot, What::kArray, n);
      napi_value e;
      Check(env_, napi_get_element(env_, v, i, &e), "get element");
      Push(e);
      if (lua_type(L_, -1) != LUA_TNIL) {
        run = 0;
        lua_rawseti(L_, -2, static_cast<lua_Integer>(i) + 1);
        continue;
      }
      lua_pop(L_, 1);  // a hole (undefined, null): nothing to store
      if (++run == kHoleRun && n - i > kHoleRun) {
        PushSparse(v, i + 1, n);
        break;
      }
    }
    --depth_;
  }

  // Whether elements are present at a few indices spread over 0..n-1, the
  // last among them: then the Array is most likely dense, and its table is
  // made whole at once. A sparse Array that has them anyway costs a table of
  // its length, which the limits bound like anything else.
  bool LooksDense(napi_value v, uint32_t n) {
    constexpr uint32_t kProbes = 8;
    for (uint32_t k = 0; k < kProbes; ++k) {
      const auto i = static_cast<uint32_t>(uint64_t{n - 1} * (kProbes - 1 - k) / (kProbes - 1));
      bool has = false;
      Check(env_, napi_has_element(env_, v, i, &has), "has element");
      if (!has) return false;
    }
    return true;
  }

  // The elements from index `from` on of an Array that proved sparse, by its
  // own keys: a cost in what it holds, not in its length.
  void PushSparse(napi_value v, uint32_t from, uint32_t n) {
    napi_value keys;
    Check(env_,
          napi_get_all_property_names(env_, v, napi_key_own_only,
                                      static_cast<napi_key_filter>(napi_key_enumerable | napi_key_skip_symbols),
                                      napi_key_keep_numbers, &keys),
          "property names");
    uint32_t m;
    Check(env_, napi_get_array_length(env_, keys, &m), "keys length");
    uint32_t stored = 0;
    for (uint32_t j = 0; j < m; ++j) {
      napi_value k, e;
      Check(env_, napi_get_element(env_, keys, j, &k), "get key");
      uint32_t i;
      if (!ElementIndex(k, &i) || i < from || i >= n) continue;  // not an element (arr.name = ...), or walked
      Check(env_, napi_get_element(env_, v, i, &e), "get element");
      napi_valuetype t;
      Check(env_, napi_typeof(env_, e, &t), "typeof");
      if (Missing(t)) continue;
      // These go to the hash part, which Lua doubles when it is full: the
      // new part is allocated while the old one still is.
      ++stored;
      Reserve((stored & (stored - 1)) == 0 ? size_t{stored} * 2 * kLuaNode : kLuaNode, What::kArray, n);
      PushTyped(e, t);
      lua_rawseti(L_, -2, static_cast<lua_Integer>(i) + 1);
    }
  }

  // An own key of an Array as an element index (V8 gives indices as numbers
  // with napi_key_keep_numbers; a canonical numeric string is taken too).
  bool ElementIndex(napi_value k, uint32_t* out) {
    napi_valuetype t;
    Check(env_, napi_typeof(env_, k, &t), "typeof");
    if (t == napi_number) {
      double d;
      napi_get_value_double(env_, k, &d);
      if (!(d >= 0 && d < 4294967295.0 && std::trunc(d) == d)) return false;
      *out = static_cast<uint32_t>(d);
      return true;
    }
    if (t != napi_string) return false;
    char buf[12];
    size_t len = 0;
    napi_get_value_string_utf8(env_, k, buf, sizeof buf, &len);
    if (len == 0 || len > 10 || (len > 1 && buf[0] == '0')) return false;
    uint64_t i = 0;
    for (size_t c = 0; c < len; ++c) {
      if (buf[c] < '0' || buf[c] > '9') return false;
      i = i * 10 + static_cast<uint64_t>(buf[c] - '0');
    }
    if (i >= 4294967295u) return false;
    *out = static_cast<uint32_t>(i);
    return true;
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
    Reserve(kLuaTable + HashBytes(n), What::kObject, n);
    lua_createtable(L_, 0, static_cast<int>(n));
    Remember(v);
    for (uint32_t i = 0; i < n; ++i) {
      napi_value k, e;
      Check(env_, napi_get_element(env_, keys, i, &k), "get key");
      Check(env_, napi_get_property(env_, v, k, &e), "get property");  // a getter may throw
      Reserve(kLuaSlot, What::kObject, n);
      PushString(k);
      Push(e);
      lua_rawset(L_, -3);
    }
    --depth_;
  }

  // Entry by entry, never more than `size` of them (the size when it began:
  // a getter that adds entries as it is read cannot make this run for ever).
  void PushMap(napi_value v, size_t size) {
    if (Memo(v)) return;
    Enter();
    Reserve(kLuaTable + HashBytes(size), What::kMap, size);
    lua_createtable(L_, 0, static_cast<int>(std::min<size_t>(size, INT32_MAX)));
    Remember(v);
    AddonData* data = AddonData::From(env_);
    napi_value it, buf;
    Check(env_, napi_call_function(env_, v, data->map_entries.Value(), 0, nullptr, &it), "Map entries");
    const uint32_t chunk = static_cast<uint32_t>(std::min<size_t>(kMapChunk, 2 * size));
    Check(env_, napi_create_array_with_length(env_, chunk, &buf), "create array");
    napi_value global;
    napi_get_global(env_, &global);
    for (size_t left = size; left > 0;) {
      napi_value args[3] = {it, buf, nullptr}, got_v;
      const uint32_t max = static_cast<uint32_t>(std::min<size_t>(chunk, 2 * left));
      napi_create_uint32(env_, max, &args[2]);
      Check(env_, napi_call_function(env_, global, data->map_chunk.Value(), 3, args, &got_v), "Map entries");
      uint32_t got = 0;
      napi_get_value_uint32(env_, got_v, &got);
      for (uint32_t j = 0; j + 1 < got; j += 2) {
        napi_value k, e;
        Check(env_, napi_get_element(env_, buf, j, &k), "get key");
        Check(env_, napi_get_element(env_, buf, j + 1, &e), "get value");
        Reserve(kLuaSlot, What::kMap, size);
        Push(k);
        if (lua_isnil(L_, -1) || (lua_type(L_, -1) == LUA_TNUMBER && lua_tonumber(L_, -1) != lua_tonumber(L_, -1))) {
          ConversionError(env_, "Cannot convert Map to Lua: key " + Describe(env_, k) +
                                    " cannot be a Lua table key (nil and NaN are not allowed).");
        }
        Push(e);
        lua_rawset(L_, -3);
      }
      left -= std::min<size_t>(left, got / 2);
      if (got < max) break;
    }
    --depth_;
  }

  RuntimeCore* core_;
  napi_env env_;
  lua_State* L_;
  const MemoryBudget* mem_;    // the host's: alive while we convert (a close() waits for the HostSection)
  size_t before_;              // bytes the state held when the conversion began
  size_t ceiling_ = SIZE_MAX;  // bytes it may hold while this conversion builds
  bool refused_ = false;
  bool many_ = false;
  int depth_ = 0;
  napi_ref memo_ = nullptr;  // JS Map: object -> index in memo_table_
  int memo_table_ = LUA_NOREF;
  int memo_count_ = 0;
};

// Runs push(c) on a fresh converter. On any throw L's top is restored and a
// refused value's partial copy collected before the exception goes on (a
// MemoryRefused too: the callers below make it their error).
template <typename F>
void Converting(RuntimeCore* core, lua_State* L, F&& push) {
  const int top = lua_gettop(L);
  JsToLua c(core, L);
  try {
    push(c);
  } catch (...) {
    lua_settop(L, top);
    c.Finish();
    if (c.refused()) lua_gc(L, LUA_GCCOLLECT);
    throw;
  }
  c.Finish();
}

[[noreturn]] void ThrowRefused(napi_env env, const MemoryRefused& r) {
  ThrowError(Napi::Env(env), "ERR_MEMORY_LIMIT",
             "The value given is too large for this runtime: converting it to Lua would take the Lua state to " +
                 std::to_string(r.would) + " bytes, past memoryLimit " + std::to_string(r.limit) + " (it held " +
                 std::to_string(r.before) + " before; refused at " + r.what +
                 ", before the value was complete). Pass a smaller value or raise the memoryLimit option.");
}

// The scalars most calls carry, of type `t`, without converter state. False
// for the rest.
bool PushScalar(napi_env env, lua_State* L, napi_value v, napi_valuetype t) {
  switch (t) {
    case napi_number: {
      double d;
      napi_get_value_double(env, v, &d);
      PushJsNumber(L, d);
      return true;
    }
    case napi_undefined:
    case napi_null:
      lua_pushnil(L);
      return true;
    case napi_boolean: {
      bool b;
      napi_get_value_bool(env, v, &b);
      lua_pushboolean(L, b);
      return true;
    }
    default:
      return false;
  }
}

bool PushScalar(napi_env env, lua_State* L, napi_value v) {
  napi_valuetype t;
  return napi_typeof(env, v, &t) == napi_ok && PushScalar(env, L, v, t);
}

// PushJsForLua past the scalars.
bool PushConverted(RuntimeCore* core, lua_State* L, napi_value v) {
  const int top = lua_gettop(L);
  const size_t before = core->MemoryUsed();
  try {
    Converting(core, L, [&](JsToLua& c) { c.Push(v); });
  } catch (const MemoryRefused& r) {
    lua_pushfstring(
        L, "not enough memory: the JS value would take the Lua state to %I bytes, past memoryLimit %I (refused at %s)",
        static_cast<lua_Integer>(r.would), static_cast<lua_Integer>(r.limit), r.what.c_str());
    return false;
  }
  // Between two checks a value can overshoot by an element: the last word.
  return !core->RefuseIfPastLimit(L, top, before);
}

}  // namespace

void PushJs(RuntimeCore* core, lua_State* L, napi_value v) {
  if (PushScalar(core->env, L, v)) return;
  try {
    Converting(core, L, [&](JsToLua& c) { c.Push(v); });
  } catch (const MemoryRefused& r) {
    ThrowRefused(core->env, r);
  }
}

void PushJsValues(RuntimeCore* core, lua_State* L, const napi_value* v, size_t n) {
  size_t i = 0;
  while (i < n && PushScalar(core->env, L, v[i])) ++i;
  if (i == n) return;
  const int top = lua_gettop(L) - static_cast<int>(i);
  try {
    Converting(core, L, [&](JsToLua& c) {
      if (n > 1) c.set_many();
      for (; i < n; ++i) c.Push(v[i]);
    });
  } catch (const MemoryRefused& r) {
    lua_settop(L, top);
    ThrowRefused(core->env, r);
  } catch (...) {
    lua_settop(L, top);
    throw;
  }
}

bool PushJsForLua(RuntimeCore* core, lua_State* L, napi_value v) {
  return PushScalar(core->env, L, v) || PushConverted(core, L, v);
}

bool PushJsForLua(RuntimeCore* core, lua_State* L, napi_value v, napi_valuetype type) {
  return PushScalar(core->env, L, v, type) || PushConverted(core, L, v);
}

}  // namespace lua_tasks
