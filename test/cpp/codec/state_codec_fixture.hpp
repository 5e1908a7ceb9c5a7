// SPDX-License-Identifier: MIT
// The state codec tests' fixture: a Lua host, helpers that build snapshots by hand, same() and random_state().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "core/base/crc32c.hpp"
#include "core/codec/state_codec.hpp"
#include "core/host/lua_host.hpp"
#include "test_clocks.hpp"

// A named namespace, not an unnamed one: every test file that includes this
// must see the same fixture class (GoogleTest refuses two of one name).
namespace lua_tasks::state_codec_testing {

// same(a, b): equal values, sharing respected. Tables are matched through
// their `__id` field (when present), so tables used as keys pair up exactly
// and two tables that were one (or one that was two) are a mismatch.
constexpr const char* kSame = R"(
function same(a, b)
  local map, rev = {}, {}
  local function eq(x, y)
    if type(x) ~= type(y) then return false end
    if type(x) == "number" then
      if math.type(x) ~= math.type(y) then return false end
      if x ~= x then return y ~= y end
      if x == 0 and math.type(x) == "float" then return 1 / x == 1 / y end
      return x == y
    end
    if type(x) ~= "table" then return x == y end
    if map[x] ~= nil or rev[y] ~= nil then return rawequal(map[x], y) and rawequal(rev[y], x) end
    if rawget(x, "__id") ~= rawget(y, "__id") then return false end
    map[x], rev[y] = y, x
    local ykeys, ny = {}, 0
    for k in next, y do
      ny = ny + 1
      if type(k) == "table" then ykeys[rawget(k, "__id") or k] = k end
    end
    local nx = 0
    for k, v in next, x do
      nx = nx + 1
      local yk = k
      if type(k) == "table" then
        yk = ykeys[rawget(k, "__id") or k]
        if yk == nil or not eq(k, yk) then return false end
      end
      if not eq(v, rawget(y, yk)) then return false end
    end
    return nx == ny
  end
  return eq(a, b)
end)";

// random_state(seed): nested tables with random keys and values of every
// persistable type, tables as keys, shared tables and cycles. Every table
// carries a unique __id for same().
constexpr const char* kRandomState = R"(
function random_state(seed)
  math.randomseed(seed)
  local pool, ids = {}, 0
  local function new_table()
    ids = ids + 1
    local t = { __id = ids }
    pool[#pool + 1] = t
    return t
  end
  local function bytes()
    local b = {}
    for i = 1, math.random(0, 12) do b[i] = string.char(math.random(0, 255)) end
    return table.concat(b)
  end
  local specials = { 0.0, -0.0, 1 / 0, -1 / 0, 1.0, 0 / 0,
                     math.maxinteger, math.mininteger, 2 ^ 53, 2 ^ 63 }
  local names = { "name", "score", "tags", "end", "a b", "", "__x" }
  local function scalar()
    local r = math.random(8)
    if r == 1 then return math.random(math.mininteger, math.maxinteger)
    elseif r == 2 then return (math.random() - 0.5) * 10 ^ math.random(-300, 300)
    elseif r == 3 then return math.random(2) == 1
    elseif r == 4 then return bytes()
    elseif r == 5 then return specials[math.random(#specials)]
    elseif r == 6 then return names[math.random(#names)]
    else return math.random(-2, 8)
    end
  end
  local value
  local function key(depth)
    local r = math.random(8)
    if r == 1 and #pool > 0 then return pool[math.random(#pool)] end
    local k
    if r == 2 and depth < 4 then k = value(depth + 1) else k = scalar() end
    if k ~= k then return 0.5 end  -- nil and nan cannot be keys
    return k
  end
  function value(depth)
    local r = math.random(10)
    if r == 1 and #pool > 0 then return pool[math.random(#pool)] end
    if r <= 5 or depth >= 5 then return scalar() end
    local t = new_table()
    for _ = 1, math.random(0, 7) do
      local k = key(depth)
      if k ~= nil then t[k] = value(depth + 1) end
    end
    if math.random(4) == 1 then for i = 1, math.random(1, 5) do t[i] = scalar() end end
    return t
  end
  local root = new_table()
  for _ = 1, math.random(0, 6) do
    local k = key(0)
    if k ~= nil then root[k] = value(1) end
  end
  return root
end)";

// A snapshot built by hand: the header, then `body`. Version 2 has no
// checksum, so a test can reach the structure checks behind it.
inline std::string Snapshot(std::string_view body, char version = 2) {
  std::string s("LTST", 4);
  s += version;
  s.append(body);
  return s;
}

// The same as version 3: the checksum appended.
inline std::string Checked(std::string_view body) {
  std::string s = Snapshot(body, 3);
  const uint32_t crc = Crc32c::Update(0, s);
  for (int i = 0; i < 4; ++i) s += static_cast<char>(crc >> (8 * i));
  return s;
}

// A version 3 snapshot as version 2 would have written it: no checksum.
inline std::string Unchecked(std::string_view v3) {
  std::string s(v3.substr(0, v3.size() - 4));
  s[4] = 2;
  return s;
}

// A table header: tag, pair count, array hint.
inline std::string TableHeader(uint32_t count, uint32_t narr = 0, char tag = '\x06') {
  std::string s(1, tag);
  for (int i = 0; i < 4; ++i) s += static_cast<char>(count >> (8 * i));
  for (int i = 0; i < 4; ++i) s += static_cast<char>(narr >> (8 * i));
  return s;
}

class StateCodec : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    host = LuaHost::Create(LuaHostOptions{}, &error);
    ASSERT_TRUE(host) << error;
    L = host->main();
    base = lua_gettop(L);  // the host may keep values of its own there
    Do(kSame);
  }
  void TearDown() override {
    EXPECT_EQ(lua_gettop(L), base);
    lua_gc(L, LUA_GCCOLLECT);  // exposes anything the codec left half-built
  }

  void Do(const std::string& src) {
    ASSERT_EQ(luaL_loadstring(L, src.c_str()), LUA_OK) << lua_tostring(L, -1);
    ASSERT_EQ(lua_pcall(L, 0, 0, 0), LUA_OK) << lua_tostring(L, -1);
  }
  // Evaluates a Lua expression and returns its truth.
  bool Eval(const std::string& expr) {
    const std::string src = "return " + expr;
    EXPECT_EQ(luaL_loadstring(L, src.c_str()), LUA_OK) << lua_tostring(L, -1);
    EXPECT_EQ(lua_pcall(L, 0, 1, 0), LUA_OK) << expr << ": " << lua_tostring(L, -1);
    const bool r = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return r;
  }
  // Encodes global `v`, decodes it into global `back`; returns the bytes.
  std::string RoundTrip() {
    LuaHost::HostSection section(host.get(), L);
    lua_getglobal(L, "v");
    std::string bytes, error;
    EXPECT_TRUE(EncodeState(L, -1, &bytes, &error)) << error;
    EXPECT_EQ(lua_gettop(L), base + 1);
    lua_pop(L, 1);
    EXPECT_TRUE(DecodeState(L, bytes, &error)) << error;
    EXPECT_EQ(lua_gettop(L), base + 1);
    lua_setglobal(L, "back");
    return bytes;
  }
  // Runs `setup` (which sets global v) and returns EncodeState's error.
  std::string EncodeError(const std::string& setup, const char* root = "state") {
    Do(setup);
    LuaHost::HostSection section(host.get(), L);
    lua_getglobal(L, "v");
    std::string bytes = "stale", error;
    EXPECT_FALSE(EncodeState(L, -1, &bytes, &error, root));
    EXPECT_TRUE(bytes.empty());
    EXPECT_EQ(lua_gettop(L), base + 1);
    lua_pop(L, 1);
    return error;
  }
  // Decodes bytes that must be refused; returns the error.
  std::string DecodeError(std::string_view bytes) {
    LuaHost::HostSection section(host.get(), L);
    std::string error;
    EXPECT_FALSE(DecodeState(L, bytes, &error));
    EXPECT_EQ(lua_gettop(L), base);
    EXPECT_FALSE(error.empty());
    return error;
  }
  std::string Encode(const std::string& setup) {
    Do(setup);
    LuaHost::HostSection section(host.get(), L);
    lua_getglobal(L, "v");
    std::string bytes, error;
    EXPECT_TRUE(EncodeState(L, -1, &bytes, &error)) << error;
    lua_pop(L, 1);
    return bytes;
  }

  std::unique_ptr<LuaHost> host;
  lua_State* L = nullptr;
  int base = 0;
};

}  // namespace lua_tasks::state_codec_testing
