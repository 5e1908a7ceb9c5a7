// SPDX-License-Identifier: MIT
// Fuzz target: random Lua value graphs survive EncodeState + DecodeState exactly.
//
// The input is a recipe: it builds nested tables with every scalar kind (integers
// with the int64 extremes, floats from raw bits: -0.0, infinities, NaNs with any
// payload, subnormals; byte strings), tables as keys, shared references and
// cycles, array parts with holes, metatables (not saved), and now and then a
// chain past kMaxStateDepth. What decodes must equal what was encoded: same
// types (integer and float apart), same bits, same strings, and the same
// sharing (one table stays one, two stay two).
//
// To compare graphs without guessing which table is which, every table gets a
// unique integer under the key "\0id", which the codec carries like any other
// entry. Each table then has a canonical form (its sorted entries, tables
// written as their ids), and the two graphs are equal when the ids map to
// distinct tables one to one and every id's canonical form matches.
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/codec/state_codec.hpp"
#include "core/host/lua_host.hpp"

namespace {

constexpr char kIdKey[] = "\0id";
constexpr size_t kIdKeyLen = 3;
// Bounds the work per input: tables built and entries written.
constexpr int kMaxTables = 300;
constexpr int kMaxEntries = 3000;

// Reads the recipe; past its end every read is zero, so every input is valid.
class Recipe {
 public:
  Recipe(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  uint8_t Byte() { return p_ < end_ ? *p_++ : 0; }
  uint64_t U64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(Byte()) << (8 * i);
    return v;
  }
  // Up to n bytes, as many as are left.
  std::string Bytes(size_t n) {
    n = std::min(n, static_cast<size_t>(end_ - p_));
    std::string s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

class Builder {
 public:
  Builder(lua_State* L, Recipe* r) : L_(L), r_(r) {}
  ~Builder() {
    for (int ref : tables_) luaL_unref(L_, LUA_REGISTRYINDEX, ref);
  }

  // Pushes one value built from the recipe. `depth` counts the tables above.
  void Value(int depth) {
    const uint8_t op = r_->Byte();
    if (op == 0xFF && depth == 0) {  // the root is a chain around the depth limit
      Chain(lua_tasks::kMaxStateDepth - 3 + r_->Byte() % 6);
      return;
    }
    switch (op % 12) {
      case 0:
        lua_pushboolean(L_, op & 0x10);
        return;
      case 1:
        lua_pushinteger(L_, static_cast<lua_Integer>(r_->U64()));
        return;
      case 2: {
        static constexpr lua_Integer kInts[] = {
            0, 1, -1, LUA_MAXINTEGER, LUA_MININTEGER, (lua_Integer{1} << 53) + 1, -(lua_Integer{1} << 53)};
        lua_pushinteger(L_, kInts[(op >> 4) % std::size(kInts)]);
        return;
      }
      case 3:
        lua_pushnumber(L_, std::bit_cast<double>(r_->U64()));  // any bits: NaN payloads too
        return;
      case 4: {
        static const double kFloats[] = {
            0.0, -0.0, 1.0, -1.0, 0.5, 1e308, 5e-324, 9007199254740993.0, 18446744073709551616.0};
        const uint8_t k = (op >> 4) % 12;
        if (k < std::size(kFloats)) {
          lua_pushnumber(L_, kFloats[k]);
        } else {
          const double inf = std::bit_cast<double>(uint64_t{0x7FF0000000000000});
          const double specials[] = {inf, -inf, std::bit_cast<double>(uint64_t{0x7FF8000000000000})};
          lua_pushnumber(L_, specials[k - std::size(kFloats)]);
        }
        return;
      }
      case 5:
      case 6: {  // a short byte string, or now and then a longer one
        const std::string s = r_->Bytes(op & 0x80 ? r_->Byte() * 4u : op >> 4);
        lua_pushlstring(L_, s.data(), s.size());
        return;
      }
      case 7:
        if (!tables_.empty()) {  // a table seen before: shared, or a cycle
          PushTable(tables_[r_->Byte() % tables_.size()]);
          return;
        }
        [[fallthrough]];
      case 8:
      case 9:
      case 10:
        if (depth < 12 && static_cast<int>(tables_.size()) < kMaxTables) {
          Table(depth + 1);
          return;
        }
        lua_pushinteger(L_, op);
        return;
      default:
        lua_pushliteral(L_, "x");
        return;
    }
  }

  // True if the graph nests more than the codec accepts.
  bool too_deep() const { return too_deep_; }

 private:
  // Pushes a new table and fills it from the recipe.
  void Table(int depth) {
    lua_checkstack(L_, 4);
    lua_newtable(L_);
    const int t = lua_gettop(L_);
    Register(t);
    const uint8_t shape = r_->Byte();
    if (shape & 0x01) {  // an array part, sometimes with holes
      const int n = r_->Byte() % 40;
      for (int i = 1; i <= n && entries_ < kMaxEntries; ++i, ++entries_) {
        Value(depth);
        lua_rawseti(L_, t, i);
      }
      if (shape & 0x02) {
        for (int i = 2; i < n; i += 3) {
          lua_pushnil(L_);
          lua_rawseti(L_, t, i);
        }
      }
    }
    const int pairs = (shape >> 2) % 10;
    for (int i = 0; i < pairs && entries_ < kMaxEntries; ++i, ++entries_) {
      Value(depth);  // the key
      if (!KeyOk(-1)) {
        lua_pop(L_, 1);
        continue;
      }
      Value(depth);
      lua_rawset(L_, t);
    }
    if (shape & 0x80) {  // a metatable the codec must ignore (and not run)
      lua_newtable(L_);
      lua_pushliteral(L_, "__index");
      lua_pushvalue(L_, t);
      lua_rawset(L_, -3);
      lua_setmetatable(L_, t);
    }
  }

  // n nested tables, the deepest holding a string.
  void Chain(int n) {
    if (n > lua_tasks::kMaxStateDepth) too_deep_ = true;
    lua_checkstack(L_, 3);
    lua_newtable(L_);
    Register(lua_gettop(L_));
    lua_pushvalue(L_, -1);  // the root, left on the stack
    for (int i = 1; i < n; ++i) {
      lua_newtable(L_);
      Register(lua_gettop(L_));
      lua_pushvalue(L_, -1);
      lua_rawseti(L_, -3, 1);
      lua_remove(L_, -2);
    }
    lua_pushliteral(L_, "bottom");
    lua_rawseti(L_, -2, 1);
    lua_pop(L_, 1);
  }

  // Gives the table at t its id and keeps it (in the registry) for references.
  void Register(int t) {
    const lua_Integer id = static_cast<lua_Integer>(tables_.size());
    lua_pushlstring(L_, kIdKey, kIdKeyLen);
    lua_pushinteger(L_, id);
    lua_rawset(L_, t);
    lua_pushvalue(L_, t);
    tables_.push_back(luaL_ref(L_, LUA_REGISTRYINDEX));
  }

  void PushTable(int ref) { lua_rawgeti(L_, LUA_REGISTRYINDEX, ref); }

  // nil and NaN cannot be keys; "\0id" is taken.
  bool KeyOk(int idx) {
    switch (lua_type(L_, idx)) {
      case LUA_TNIL:
        return false;
      case LUA_TNUMBER:
        return lua_isinteger(L_, idx) || lua_tonumber(L_, idx) == lua_tonumber(L_, idx);
      case LUA_TSTRING: {
        size_t n;
        const char* s = lua_tolstring(L_, idx, &n);
        return !(n == kIdKeyLen && std::memcmp(s, kIdKey, n) == 0);
      }
      default:
        return true;
    }
  }

 private:
  lua_State* L_;
  Recipe* r_;
  std::vector<int> tables_;  // registry refs, indexed by id
  int entries_ = 0;
  bool too_deep_ = false;
};

// ---------------------------------------------------------------------------
// Comparison

// A value as text: type and exact contents; a table as its id.
std::string Repr(lua_State* L, int idx) {
  switch (lua_type(L, idx)) {
    case LUA_TNIL:
      return "nil";
    case LUA_TBOOLEAN:
      return lua_toboolean(L, idx) ? "true" : "false";
    case LUA_TNUMBER:
      if (lua_isinteger(L, idx)) return "i" + std::to_string(lua_tointeger(L, idx));
      return "f" + std::to_string(std::bit_cast<uint64_t>(lua_tonumber(L, idx)));
    case LUA_TSTRING: {
      size_t n;
      const char* s = lua_tolstring(L, idx, &n);
      return "s" + std::to_string(n) + ":" + std::string(s, n);
    }
    case LUA_TTABLE: {
      lua_pushlstring(L, kIdKey, kIdKeyLen);
      lua_rawget(L, idx < 0 ? idx - 1 : idx);
      const bool has = lua_isinteger(L, -1);
      const std::string r = has ? "t" + std::to_string(lua_tointeger(L, -1)) : "t?";
      lua_pop(L, 1);
      return r;
    }
    default:
      return std::string("?") + lua_typename(L, lua_type(L, idx));
  }
}

// Walks the graph from the value at idx; per id, the table's canonical form.
// Returns false if two distinct tables carry one id, or a table none.
bool Canon(lua_State* L, int idx, std::map<lua_Integer, std::string>* out) {
  std::map<lua_Integer, const void*> seen;
  std::vector<int> pending;  // registry refs of tables still to walk
  auto visit = [&](int i) {
    if (lua_type(L, i) != LUA_TTABLE) return true;
    const int abs = lua_absindex(L, i);
    lua_pushlstring(L, kIdKey, kIdKeyLen);
    lua_rawget(L, abs);
    if (!lua_isinteger(L, -1)) {
      lua_pop(L, 1);
      return false;
    }
    const lua_Integer id = lua_tointeger(L, -1);
    lua_pop(L, 1);
    auto [it, fresh] = seen.emplace(id, lua_topointer(L, abs));
    if (!fresh) return it->second == lua_topointer(L, abs);
    lua_pushvalue(L, abs);
    pending.push_back(luaL_ref(L, LUA_REGISTRYINDEX));
    return true;
  };
  bool ok = visit(idx);
  while (ok && !pending.empty()) {
    const int ref = pending.back();
    pending.pop_back();
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
    luaL_unref(L, LUA_REGISTRYINDEX, ref);
    const int t = lua_gettop(L);
    std::vector<std::string> entries;
    lua_pushnil(L);
    while (ok && lua_next(L, t) != 0) {
      ok = visit(-2) && visit(-1);
      entries.push_back(Repr(L, -2) + "=" + Repr(L, -1));
      lua_pop(L, 1);
    }
    if (!ok) lua_pop(L, 1);  // the key lua_next left
    std::sort(entries.begin(), entries.end());
    std::string form;
    for (const std::string& e : entries) form += e + '\n';
    lua_pushlstring(L, kIdKey, kIdKeyLen);
    lua_rawget(L, t);
    (*out)[lua_tointeger(L, -1)] = std::move(form);
    lua_settop(L, t - 1);
  }
  for (int ref : pending) luaL_unref(L, LUA_REGISTRYINDEX, ref);
  return ok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::unique_ptr<lua_tasks::LuaHost> host = [] {
    std::string error;
    return lua_tasks::LuaHost::Create(lua_tasks::LuaHostOptions{}, &error);
  }();
  lua_State* L = host->main();
  lua_tasks::LuaHost::HostSection section(host.get(), L);
  const int top = lua_gettop(L);
  Recipe recipe(data, size);
  bool too_deep;
  {
    Builder b(L, &recipe);
    b.Value(0);
    too_deep = b.too_deep();
  }
  const int original = lua_gettop(L);
  if (original != top + 1) __builtin_trap();

  std::string bytes, error;
  const bool encoded = lua_tasks::EncodeState(L, original, &bytes, &error);
  if (lua_gettop(L) != original) __builtin_trap();  // the stack is left as it was
  if (!encoded) {
    // Only nesting past the limit is refused here: everything else persists.
    if (!too_deep || error.find("nested more than") == std::string::npos || !bytes.empty()) __builtin_trap();
  } else {
    if (too_deep) __builtin_trap();
    if (!lua_tasks::DecodeState(L, bytes, &error)) __builtin_trap();
    const int decoded = lua_gettop(L);
    if (decoded != original + 1) __builtin_trap();
    if (Repr(L, original) != Repr(L, decoded)) __builtin_trap();  // the root itself
    std::map<lua_Integer, std::string> a, b;
    if (!Canon(L, original, &a) || !Canon(L, decoded, &b)) __builtin_trap();
    if (a != b) __builtin_trap();
    // The copy is new: no table of it is a table of the original.
    if (lua_type(L, original) == LUA_TTABLE && lua_rawequal(L, original, decoded)) __builtin_trap();
  }
  lua_settop(L, top);
  lua_gc(L, LUA_GCCOLLECT);
  return 0;
}
