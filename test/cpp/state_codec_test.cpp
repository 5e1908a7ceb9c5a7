// SPDX-License-Identifier: MIT
// Tests for the state codec: round trips, sharing and cycles, error paths, corrupt input.
#include "state_codec.hpp"

#include <random>
#include <string>

#include <gtest/gtest.h>

#include "lua_host.hpp"

namespace lua_tasks {
namespace {

class StateCodec : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    host = LuaHost::Create(LuaHostOptions{}, &error);
    ASSERT_TRUE(host) << error;
    L = host->main();
    // deep(a, b): equal values, with sharing respected (a bijection of tables).
    Do(R"(function deep(a, b, seen)
      seen = seen or {}
      if type(a) ~= type(b) then return false end
      if type(a) == "number" then
        if math.type(a) ~= math.type(b) then return false end
        return a == b or (a ~= a and b ~= b)
      end
      if type(a) ~= "table" then return a == b end
      if seen[a] ~= nil then return seen[a] == b end
      seen[a] = b
      local n = 0
      for k, v in pairs(a) do
        n = n + 1
        local bk = k
        if type(k) == "table" then
          bk = nil
          for k2 in pairs(b) do if type(k2) == "table" and (seen[k] == k2 or (seen[k] == nil and deep(k, k2, seen))) then bk = k2 break end end
          if bk == nil then return false end
        end
        if not deep(v, b[bk], seen) then return false end
      end
      for _ in pairs(b) do n = n - 1 end
      return n == 0
    end)");
  }
  void Do(const std::string& src) {
    ASSERT_EQ(luaL_loadstring(L, src.c_str()), LUA_OK) << lua_tostring(L, -1);
    ASSERT_EQ(lua_pcall(L, 0, LUA_MULTRET, 0), LUA_OK) << lua_tostring(L, -1);
  }
  // Encodes global `name`, decodes it into global `back`; returns the bytes.
  std::string RoundTrip(const char* name) {
    LuaHost::HostSection section(host.get(), L);
    lua_getglobal(L, name);
    std::string bytes, error;
    EXPECT_TRUE(EncodeState(L, -1, &bytes, &error)) << error;
    lua_pop(L, 1);
    EXPECT_TRUE(DecodeState(L, bytes, &error)) << error;
    lua_setglobal(L, "back");
    return bytes;
  }
  bool Same(const char* name) {
    lua_getglobal(L, "deep");
    lua_getglobal(L, name);
    lua_getglobal(L, "back");
    EXPECT_EQ(lua_pcall(L, 2, 1, 0), LUA_OK) << lua_tostring(L, -1);
    const bool same = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return same;
  }
  std::string EncodeError(const std::string& setup) {
    Do(setup);
    LuaHost::HostSection section(host.get(), L);
    lua_getglobal(L, "v");
    std::string bytes, error;
    EXPECT_FALSE(EncodeState(L, -1, &bytes, &error));
    lua_pop(L, 1);
    return error;
  }
  std::unique_ptr<LuaHost> host;
  lua_State* L = nullptr;
};

TEST_F(StateCodec, RoundTripsEveryPersistableValue) {
  const char* rows[] = {
      "v = nil",
      "v = true",
      "v = { false, true }",
      "v = { math.maxinteger, math.mininteger, 0, -1, 2^53 + 1 }",
      "v = { 1.0, -0.0, 1/0, -1/0, 0/0, 0.1, 2^63 }",
      "v = { s = 'x\\0y\\255\\xC3\\x28', e = '', long = ('ab'):rep(100000) }",
      "v = { [1.5] = 'f', [true] = 'b', [2] = 'i', ['2'] = 's' }",
      "v = { players = { { name = 'ann', score = 1.5, tags = { 'a', 'b' } } } }",
  };
  for (const char* row : rows) {
    Do(row);
    RoundTrip("v");
    EXPECT_TRUE(Same("v")) << row;
  }
}

TEST_F(StateCodec, KeepsSharedReferencesAndCycles) {
  Do("local shared = {} v = { a = shared, b = shared } v.self = v v[shared] = 'table key'");
  RoundTrip("v");
  Do("ok = rawequal(back.a, back.b) and rawequal(back.self, back) and back[back.a] == 'table key'");
  lua_getglobal(L, "ok");
  EXPECT_TRUE(lua_toboolean(L, -1));
  lua_pop(L, 1);
}

TEST_F(StateCodec, IntegersAndFloatsStayApart) {
  Do("v = { 1, 1.0 }");
  RoundTrip("v");
  Do("types = math.type(back[1]) .. ' ' .. math.type(back[2])");
  lua_getglobal(L, "types");
  EXPECT_STREQ(lua_tostring(L, -1), "integer float");
  lua_pop(L, 1);
}

TEST_F(StateCodec, UnpersistableValuesNameTheirPath) {
  EXPECT_EQ(EncodeError("v = { players = { {}, {}, { onHit = function() end } } }"),
            "state.players[3].onHit: cannot persist a function");
  EXPECT_EQ(EncodeError("v = { co = coroutine.create(print) }"), "state.co: cannot persist a thread");
  EXPECT_EQ(EncodeError("v = { ['a key'] = { [2.5] = print } }"), "state[\"a key\"][2.5]: cannot persist a function");
  EXPECT_EQ(EncodeError("v = { inner = { [print] = 1 } }"), "state.inner: cannot persist a table key that is a function");
  lua_newuserdatauv(L, 8, 0);
  lua_setglobal(L, "u");
  EXPECT_EQ(EncodeError("v = { u = u }"), "state.u: cannot persist a userdata");
  EXPECT_NE(EncodeError("v = {} local t = v for i = 1, 300 do t.x = {} t = t.x end").find("nested more than 200"),
            std::string::npos);
}

TEST_F(StateCodec, RefusesCorruptTruncatedAndForeignInput) {
  Do("v = { a = { 1, 2, 'three' }, b = 4.5 } v.c = v.a");
  const std::string good = RoundTrip("v");
  LuaHost::HostSection section(host.get(), L);
  std::string error;
  const int top = lua_gettop(L);
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(DecodeState(L, good.substr(0, n), &error)) << "truncated at " << n;
    EXPECT_EQ(lua_gettop(L), top);
  }
  EXPECT_FALSE(DecodeState(L, "XXXX\x01", &error));
  EXPECT_EQ(error, "not a lua-tasks state snapshot (bad magic)");
  std::string v2 = good;
  v2[4] = 2;
  EXPECT_FALSE(DecodeState(L, v2, &error));
  EXPECT_NE(error.find("version 2 is not supported"), std::string::npos);
  EXPECT_FALSE(DecodeState(L, good + "x", &error));
  EXPECT_FALSE(DecodeState(L, std::string("LTST\x01\x06\xff\xff\xff\x7f\x00", 11), &error));  // absurd count
  EXPECT_NE(error.find("past the end"), std::string::npos);
  EXPECT_FALSE(DecodeState(L, std::string("LTST\x01\x07\x00", 7), &error));  // reference to nothing
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {  // flipped bytes: refused or decoded, never a crash
    std::string bad = good;
    bad[5 + rng() % (bad.size() - 5)] ^= static_cast<char>(1 + rng() % 255);
    if (DecodeState(L, bad, &error)) lua_pop(L, 1);
    EXPECT_EQ(lua_gettop(L), top);
  }
}

TEST_F(StateCodec, RandomTablesRoundTrip) {
  Do(R"(function random_value(depth, pool)
    local r = math.random(10)
    if r == 1 then return math.random(-1e9, 1e9)
    elseif r == 2 then return math.random() * 1e6
    elseif r == 3 then return math.random(2) == 1
    elseif r == 4 then local t = {} for i = 1, math.random(0, 20) do t[i] = string.char(math.random(0, 255)) end return table.concat(t)
    elseif r == 5 and #pool > 0 then return pool[math.random(#pool)]
    elseif depth < 6 then
      local t = {}
      pool[#pool + 1] = t
      for _ = 1, math.random(0, 6) do
        -- Scalar keys: deep() compares tables keyed by tables only through
        -- identity, which KeepsSharedReferencesAndCycles covers.
        local k = random_value(6, {})
        if k ~= nil and k == k and type(k) ~= "table" then t[k] = random_value(depth + 1, pool) end
      end
      return t
    end
    return "leaf"
  end)");
  for (int seed = 1; seed <= 1000; ++seed) {
    Do("math.randomseed(" + std::to_string(seed) + ") v = random_value(0, {})");
    RoundTrip("v");
    ASSERT_TRUE(Same("v")) << "seed " << seed;
  }
}

}  // namespace
}  // namespace lua_tasks
