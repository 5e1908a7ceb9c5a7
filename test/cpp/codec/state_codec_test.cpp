// SPDX-License-Identifier: MIT
// Tests for the state codec: round trips, sharing and cycles, error paths, corrupt input.
#include "core/codec/state_codec.hpp"

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/base/crc32c.hpp"
#include "core/host/lua_host.hpp"
#include "test_clocks.hpp"

namespace lua_tasks {
namespace {

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
std::string Snapshot(std::string_view body, char version = 2) {
  std::string s("LTST", 4);
  s += version;
  s.append(body);
  return s;
}

// The same as version 3: the checksum appended.
std::string Checked(std::string_view body) {
  std::string s = Snapshot(body, 3);
  const uint32_t crc = Crc32c::Update(0, s);
  for (int i = 0; i < 4; ++i) s += static_cast<char>(crc >> (8 * i));
  return s;
}

// A version 3 snapshot as version 2 would have written it: no checksum.
std::string Unchecked(std::string_view v3) {
  std::string s(v3.substr(0, v3.size() - 4));
  s[4] = 2;
  return s;
}

// A table header: tag, pair count, array hint.
std::string TableHeader(uint32_t count, uint32_t narr = 0, char tag = '\x06') {
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

// ---------------------------------------------------------------------------
// Round trips

struct RoundTripRow {
  const char* value;  // Lua code setting v
  const char* check;  // a Lua expression about `back` that must hold
};

TEST_F(StateCodec, RoundTripsEveryPersistableValue) {
  const RoundTripRow rows[] = {
      {"v = nil", "back == nil"},
      {"v = true", "back == true"},
      {"v = false", "back == false"},
      {"v = 0", "math.type(back) == 'integer' and back == 0"},
      {"v = math.maxinteger", "math.type(back) == 'integer' and back == math.maxinteger"},
      {"v = math.mininteger", "math.type(back) == 'integer' and back == math.mininteger"},
      {"v = -1", "math.type(back) == 'integer' and back == -1"},
      {"v = math.tointeger(2^53) + 1", "math.type(back) == 'integer' and back == 9007199254740993"},
      {"v = 1.0", "math.type(back) == 'float' and back == 1"},
      {"v = 0.0", "math.type(back) == 'float' and 1 / back == 1 / 0"},
      {"v = -0.0", "math.type(back) == 'float' and 1 / back == -1 / 0"},
      {"v = 1 / 0", "back == math.huge"},
      {"v = -1 / 0", "back == -math.huge"},
      {"v = 0 / 0", "math.type(back) == 'float' and back ~= back"},
      {"v = 0.1", "back == 0.1"},
      {"v = 2^63", "math.type(back) == 'float' and back == 2^63"},
      {"v = 5e-324", "back == 5e-324 and back > 0"},
      {"v = ''", "back == ''"},
      {"v = 'x\\0y\\0'", "back == 'x\\0y\\0' and #back == 4"},
      {"v = '\\255\\xC3\\x28\\xED\\xA0\\x80'", "back == '\\255\\xC3\\x28\\xED\\xA0\\x80'"},
      {"v = ('ab\\0'):rep(100000)", "#back == 300000 and back == ('ab\\0'):rep(100000)"},
      {"v = {}", "type(back) == 'table' and next(back) == nil"},
      {"v = { 1, 1.0, '1' }", "math.type(back[1]) == 'integer' and math.type(back[2]) == 'float' and back[3] == '1'"},
      {"v = { [1.5] = 'f', [true] = 'b', [false] = 'c', [2] = 'i', ['2'] = 's', [-0.0] = 'z' }",
       "back[1.5] == 'f' and back[true] == 'b' and back[false] == 'c' and back[2] == 'i' and "
       "back['2'] == 's' and back[0] == 'z'"},
      {"v = { [math.mininteger] = 1, [math.maxinteger] = 2, [1/0] = 3, [-1/0] = 4, [2^63] = 5 }",
       "back[math.mininteger] == 1 and back[math.maxinteger] == 2 and back[1/0] == 3 and "
       "back[-1/0] == 4 and back[2^63] == 5"},
      {"v = { ['\\0k\\255'] = '\\0v' }", "back['\\0k\\255'] == '\\0v'"},
      {"v = { { { { 'deep' } } } }", "back[1][1][1][1] == 'deep'"},
      {"v = { players = { { name = 'ann', score = 1.5, tags = { 'a', 'b' } } } }",
       "back.players[1].name == 'ann' and back.players[1].score == 1.5 and #back.players[1].tags "
       "== 2"},
      // The border of a holey array can exceed its pair count: the array
      // hint must not (regression: it was refused as corrupt).
      {"v = { 1, 2, 3, 4, 5, 6, 7, 8 } for i = 2, 7 do v[i] = nil end",
       "back[1] == 1 and back[8] == 8 and back[2] == nil"},
      {"v = {} for i = 1, 1000 do v[i] = i * 0.5 end v.n = 1000",
       "#back == 1000 and back[1000] == 500.0 and back.n == 1000"},
      {"v = { [{ __id = 1 }] = 'table key', x = { __id = 2 } }",
       "(function() for k, x in pairs(back) do if type(k) == 'table' then return k.__id == 1 and "
       "x == 'table key' end end end)()"},
  };
  for (const RoundTripRow& row : rows) {
    SCOPED_TRACE(row.value);
    Do(row.value);
    RoundTrip();
    EXPECT_TRUE(Eval(row.check)) << row.check;
    EXPECT_TRUE(Eval("same(v, back)"));
  }
}

// The decoder keeps recent short strings by content (words of the first 16
// bytes, then the tail): strings that differ in one byte anywhere, at every
// length around the word and short-string bounds, repeated so later copies
// come from it, and as the very last bytes of a snapshot.
TEST_F(StateCodec, RoundTripsShortStringsThatDifferInOneByte) {
  Do(R"(
    v = {}
    for n = 0, 45 do
      for pos = 1, n do
        local a = ("k"):rep(n)
        local b = a:sub(1, pos - 1) .. "\0" .. a:sub(pos + 1)
        v[#v + 1] = { [a] = n, [b] = -n, a, b, a, b }
      end
    end)");
  RoundTrip();
  EXPECT_TRUE(Eval("same(v, back)"));
  for (int n = 0; n <= 45; ++n) {
    SCOPED_TRACE("a root string of " + std::to_string(n) + " bytes");
    Do("v = ('s'):rep(" + std::to_string(n) + ")");
    RoundTrip();
    EXPECT_TRUE(Eval("back == v"));
  }
}

TEST_F(StateCodec, KeepsSharedReferencesAndCycles) {
  Do(R"(local shared = { 'shared' }
    v = { a = shared, b = { inner = shared } }
    v.self = v
    v[shared] = 'table as key'
    v[v] = v
    local x, y = {}, {}
    x.y, y.x = y, x
    v.x = x)");
  RoundTrip();
  EXPECT_TRUE(Eval("rawequal(back.a, back.b.inner)"));
  EXPECT_TRUE(Eval("rawequal(back.self, back)"));
  EXPECT_TRUE(Eval("back[back.a] == 'table as key'"));
  EXPECT_TRUE(Eval("rawequal(back[back], back)"));
  EXPECT_TRUE(Eval("rawequal(back.x.y.x, back.x) and not rawequal(back.x, back.x.y)"));
  EXPECT_TRUE(Eval("not rawequal(back, v) and not rawequal(back.a, v.a)"));
}

// One string in many places is written once: the encoding stays close to
// the memory the value holds in Lua (a script cannot make a small table
// encode to gigabytes).
TEST_F(StateCodec, WritesARepeatedStringOnce) {
  Do(R"(local s = string.rep("x", 65536)
    v = { s = s, t = { s, s } }
    for i = 1, 16000 do v[i] = s end)");
  const std::string bytes = Encode("");
  EXPECT_LT(bytes.size(), size_t{65536} + 16000 * 12);
  RoundTrip();
  EXPECT_TRUE(Eval("back[1] == v.s and back[16000] == v.s and back.t[2] == v.s and #back == 16000"));
}

TEST_F(StateCodec, RoundTripsSharedStringsAsKeysAndValues) {
  Do(R"(local k = "a key long enough to be shared"
    local w = "a value long enough to be shared"
    v = { [k] = w, inner = { [k] = k, [w] = { w } }, short = "ab", again = "ab" })");
  RoundTrip();
  EXPECT_TRUE(Eval("back['a key long enough to be shared'] == 'a value long enough to be shared'"));
  EXPECT_TRUE(Eval("back.inner['a value long enough to be shared'][1] == 'a value long enough to be shared'"));
}

TEST_F(StateCodec, RefusesAReferenceToAStringNotMarkedShared) {
  const std::string s16(16, 'q');
  EXPECT_EQ(DecodeError(Checked(TableHeader(2) + "\x03" + std::string(8, '\0') + "\x05\x10" + s16 + "\x03" +
                                std::string("\x01\0\0\0\0\0\0\0", 8) + std::string("\x09\x00", 2))),
            "corrupt state snapshot: reference to a string not marked shared at byte 52");
}

TEST_F(StateCodec, RefusesToEncodePastTheGuardsSize) {
  Do(R"(v = {} for i = 1, 1000 do v[i] = "distinct " .. i end)");
  LuaHost::HostSection section(host.get(), L);
  lua_getglobal(L, "v");
  std::string out, error;
  CodecFailure failure;
  EXPECT_FALSE(EncodeState(L, -1, &out, &error, "state", CodecGuard{.max_bytes = 4096}, &failure));
  EXPECT_EQ(failure, CodecFailure::kTooLarge);
  EXPECT_NE(error.find("encodes to more than 4096 bytes"), std::string::npos) << error;
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(EncodeState(L, -1, &out, &error, "state", CodecGuard{.max_bytes = 1 << 20}, &failure)) << error;
  lua_pop(L, 1);
}

TEST_F(StateCodec, DecodesUnderTheMemoryLimitOfItsGuard) {
  Do(R"(v = {} for i = 1, 20000 do v[i] = { i, "distinct value " .. i } end)");
  const std::string bytes = Encode("");
  LuaHost::HostSection section(host.get(), L);
  MemoryBudget& memory = host->memory();
  const size_t saved = memory.limit;
  memory.limit = memory.used + (size_t{256} << 10);  // room for far less than the value
  std::string error;
  CodecFailure failure;
  const int top = lua_gettop(L);
  EXPECT_FALSE(DecodeState(L, bytes, &error, &failure, CodecGuard{.memory = &memory}));
  EXPECT_EQ(failure, CodecFailure::kNoRoom);
  EXPECT_NE(error.find("memoryLimit"), std::string::npos) << error;
  EXPECT_EQ(lua_gettop(L), top);
  memory.limit = saved;
  EXPECT_TRUE(DecodeState(L, bytes, &error, &failure, CodecGuard{.memory = &memory})) << error;
  lua_pop(L, 1);
}

// Work done on a script's behalf stops when the host says stop (taskTimeout,
// worker.terminate()): both directions ask the guard every check interval.
TEST_F(StateCodec, BothDirectionsStopWhenTheirGuardSaysStop) {
  Do(R"(v = {} for i = 1, 20000 do v[i] = { i, "distinct value " .. i } end)");
  const std::string bytes = Encode("");
  LuaHost::HostSection section(host.get(), L);
  host->set_interrupt_poll([](void*) { return true; }, nullptr);
  host->RequestInterrupt();
  lua_getglobal(L, "v");
  std::string out, error;
  CodecFailure failure;
  EXPECT_FALSE(EncodeState(L, -1, &out, &error, "state", CodecGuard{.stop = host.get()}, &failure));
  EXPECT_EQ(failure, CodecFailure::kStopped);
  lua_pop(L, 1);
  const int top = lua_gettop(L);
  EXPECT_FALSE(DecodeState(L, bytes, &error, &failure, CodecGuard{.stop = host.get()}));
  EXPECT_EQ(failure, CodecFailure::kStopped);
  EXPECT_EQ(lua_gettop(L), top);
}

TEST_F(StateCodec, DistinctEqualTablesStayDistinct) {
  Do("v = { {}, {} }");
  RoundTrip();
  EXPECT_TRUE(Eval("not rawequal(back[1], back[2])"));
}

TEST_F(StateCodec, IgnoresMetatablesAndRunsNoMetamethods) {
  Do(R"(v = setmetatable({ a = 1 }, {
      __pairs = function() error('ran __pairs') end,
      __index = function() error('ran __index') end,
      __len = function() error('ran __len') end }))");
  RoundTrip();
  EXPECT_TRUE(Eval("getmetatable(back) == nil and back.a == 1"));
}

TEST_F(StateCodec, EncodesAValueBelowTheTopAndKeepsTheStack) {
  Do("v = { 1, 2 }");
  LuaHost::HostSection section(host.get(), L);
  lua_getglobal(L, "v");
  lua_pushinteger(L, 7);
  std::string bytes, error;
  EXPECT_TRUE(EncodeState(L, -2, &bytes, &error)) << error;
  EXPECT_EQ(lua_gettop(L), base + 2);
  EXPECT_EQ(lua_tointeger(L, -1), 7);
  lua_settop(L, base);
}

TEST_F(StateCodec, LeavesTheCollectorAsItFoundIt) {
  Do("v = { 1 }");
  RoundTrip();
  EXPECT_TRUE(Eval("collectgarbage('isrunning')"));
  Do("collectgarbage('stop')");
  RoundTrip();
  EXPECT_FALSE(Eval("collectgarbage('isrunning')"));
  Do("collectgarbage('restart')");
}

TEST_F(StateCodec, RoundTripsAThousandRandomTables) {
  Do(kRandomState);
  for (int seed = 1; seed <= 1000; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Do("v = random_state(" + std::to_string(seed) + ")");
    RoundTrip();
    ASSERT_TRUE(Eval("same(v, back)"));
  }
}

TEST_F(StateCodec, TheEqualityCheckSeesLostOrAddedSharing) {
  Do("local t = { __id = 1 } v = { __id = 0, a = t, b = t }");
  Do("back = { __id = 0, a = { __id = 1 }, b = { __id = 1 } }");
  EXPECT_FALSE(Eval("same(v, back)"));
  EXPECT_FALSE(Eval("same(back, v)"));
  Do("back = { __id = 0, a = v.a, b = v.a }");
  EXPECT_TRUE(Eval("same(v, back)"));
  EXPECT_FALSE(Eval("same({ -0.0 }, { 0.0 }) or same({ 1 }, { 1.0 })"));
}

TEST_F(StateCodec, NestsUpToTheDepthLimit) {
  const std::string nest =
      "v = {} local t = v for i = 2, " + std::to_string(kMaxStateDepth) + " do t.x = {} t = t.x end t.x = 'bottom'";
  Do(nest);
  RoundTrip();
  EXPECT_TRUE(Eval("same(v, back)"));
}

// ---------------------------------------------------------------------------
// Values that cannot persist

struct EncodeErrorRow {
  const char* value;
  const char* error;
};

TEST_F(StateCodec, UnpersistableValuesNameTheirPath) {
  const EncodeErrorRow rows[] = {
      {"v = { players = { {}, {}, { onHit = function() end } } }", "state.players[3].onHit: cannot persist a function"},
      {"v = { co = coroutine.create(print) }", "state.co: cannot persist a coroutine"},
      {"v = print", "state: cannot persist a function"},
      {"v = { ['a key'] = { [2.5] = print } }", "state[\"a key\"][2.5]: cannot persist a function"},
      {"v = { ['end'] = { _ok9 = print } }", "state[\"end\"]._ok9: cannot persist a function"},
      {"v = { ['9x'] = print }", "state[\"9x\"]: cannot persist a function"},
      {"v = { ['q\"\\\\\\n\\0\\255'] = print }", "state[\"q\\\"\\\\\\n\\000\\255\"]: cannot persist a function"},
      {"v = { ['日本'] = print }", "state[\"日本\"]: cannot persist a function"},
      {"v = { [('k-'):rep(25)] = print }",
       "state[\"k-k-k-k-k-k-k-k-k-k-k-k-k-k-k-k-k-k-k-k-\"...]: cannot persist a function"},
      {"v = { [('k'):rep(50)] = print }",
       "state.kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk: cannot persist a function"},
      {"v = { [true] = { [false] = print } }", "state[true][false]: cannot persist a function"},
      {"v = { [-7] = { [math.mininteger] = print } }", "state[-7][-9223372036854775808]: cannot persist a function"},
      {"v = { [1/0] = { [-1/0] = print } }", "state[1/0][-1/0]: cannot persist a function"},
      {"v = { [2^63] = print }", "state[9.2233720368548e+18]: cannot persist a function"},
      {"v = { [{}] = print }", "state[table]: cannot persist a function"},
      {"v = { inner = { [print] = 1 } }", "state.inner: cannot persist a table key that is a function"},
      {"v = { inner = { [coroutine.create(print)] = 1 } }",
       "state.inner: cannot persist a table key that is a coroutine"},
      {"v = { list = { 1, 2, { ok = true }, { bad = { print } } } }",
       "state.list[4].bad[1]: cannot persist a function"},
  };
  for (const EncodeErrorRow& row : rows) EXPECT_EQ(EncodeError(row.value), row.error) << row.value;
}

TEST_F(StateCodec, UserdataCannotPersist) {
  lua_newuserdatauv(L, 8, 0);
  lua_setglobal(L, "u");
  lua_pushlightuserdata(L, this);
  lua_setglobal(L, "lu");
  EXPECT_EQ(EncodeError("v = { u = u }"), "state.u: cannot persist a userdata");
  EXPECT_EQ(EncodeError("v = { deep = { lu } }"), "state.deep[1]: cannot persist a light userdata");
  EXPECT_EQ(EncodeError("v = { [u] = 1 }"), "state: cannot persist a table key that is a userdata");
}

TEST_F(StateCodec, NamesThePathFromTheGivenRoot) {
  EXPECT_EQ(EncodeError("v = { f = print }", "tasks.state"), "tasks.state.f: cannot persist a function");
}

TEST_F(StateCodec, RefusesToEncodePastTheDepthLimit) {
  const std::string nest =
      "v = {} local t = v for i = 2, " + std::to_string(kMaxStateDepth + 1) + " do t.x = {} t = t.x end";
  const std::string error = EncodeError(nest);
  EXPECT_EQ(error.substr(0, 8), "state.x.");
  EXPECT_NE(error.find(": nested more than 200 tables deep"), std::string::npos) << error;
}

TEST_F(StateCodec, ACycleIsNotDepth) {
  Do("v = {} local t = v for i = 2, 150 do t.x = {} t = t.x end t.x = v");
  RoundTrip();
  EXPECT_TRUE(Eval("same(v, back)"));
}

// ---------------------------------------------------------------------------
// Corrupt, truncated and foreign input

TEST_F(StateCodec, RefusesEveryTruncation) {
  Do(kRandomState);
  const std::string good = Encode("v = random_state(3) v.s = 'string' v.f = 1.5 v.again = v");
  ASSERT_GT(good.size(), 40u);
  // Version 3 by its checksum; version 2, which has none, by its structure.
  for (const std::string& bytes : {good, Unchecked(good)}) {
    for (size_t n = 0; n < bytes.size(); ++n) {
      SCOPED_TRACE("truncated at " + std::to_string(n) + " of " + std::to_string(bytes.size()));
      DecodeError(std::string_view(bytes).substr(0, n));
    }
  }
}

TEST_F(StateCodec, RefusesForeignBuffers) {
  EXPECT_EQ(DecodeError(""), "not a lua-tasks state snapshot (bad magic)");
  EXPECT_EQ(DecodeError("XXXX\x02"), "not a lua-tasks state snapshot (bad magic)");
  EXPECT_EQ(DecodeError("{\"json\": true}"), "not a lua-tasks state snapshot (bad magic)");
  EXPECT_EQ(DecodeError("LTS"), "corrupt state snapshot: truncated header");
  EXPECT_EQ(DecodeError(Snapshot("\x02", 1)),
            "state snapshot version 1 is not supported (this build reads versions 2 to 4)");
  EXPECT_EQ(DecodeError(Snapshot("\x02", 5)),
            "state snapshot version 5 is not supported (this build reads versions 2 to 4)");
  EXPECT_EQ(DecodeError(Snapshot("\x02", 4)), "corrupt state snapshot: truncated checksum");
  EXPECT_EQ(DecodeError(Snapshot("\x02", 3)), "corrupt state snapshot: truncated checksum");
  EXPECT_EQ(DecodeError(Snapshot(std::string("\x02\x00\x00\x00\x00", 5), 3)),
            "corrupt state snapshot: checksum mismatch");
}

struct CorruptRow {
  std::string body;   // after the header
  const char* error;  // after "corrupt state snapshot: "
};

TEST_F(StateCodec, RefusesCorruptStructure) {
  const std::string nan_key = std::string("\x04\x00\x00\x00\x00\x00\x00\xf8\x7f", 9);
  const CorruptRow rows[] = {
      {"", "truncated value at byte 5"},
      {std::string("\x02\x00", 2), "bytes after the value at byte 6"},
      {"\x0b", "unknown value tag 11 at byte 5"},
      {"\x09\x7f", "reference to a string not yet seen at byte 7"},
      {"\xff", "unknown value tag 255 at byte 5"},
      {"\x03\x01\x02", "truncated number at byte 6"},
      {"\x05\x05"
       "abc",
       "string length past the end at byte 7"},
      {"\x05\xff\xff\xff\xff\xff\xff\xff\xff\x3f", "string length past the end at byte 15"},
      {"\x05\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", "malformed length at byte 16"},
      {"\x05\x80", "truncated length at byte 7"},
      {TableHeader(0xffffffff), "table count past the end at byte 14"},
      {TableHeader(3) + "\x02\x02", "table count past the end at byte 14"},
      {TableHeader(1, 2) + "\x02\x02", "array size larger than the table at byte 14"},
      {"\x06\x01\x00", "truncated table header at byte 6"},
      {std::string("\x07\x00", 2), "reference to a table not yet seen at byte 7"},
      {TableHeader(1) + std::string("\x02\x07\x00", 3), "reference to a table not marked shared at byte 17"},
      {TableHeader(1) + "\x02\x07\x01", "reference to a table not yet seen at byte 17"},
      {TableHeader(1) + std::string("\x00\x02", 2), "nil table key at byte 16"},
      {TableHeader(1) + nan_key + "\x02", "nan table key at byte 24"},
  };
  for (const CorruptRow& row : rows) {
    SCOPED_TRACE(row.error);
    EXPECT_EQ(DecodeError(Snapshot(row.body)), std::string("corrupt state snapshot: ") + row.error);
  }
}

TEST_F(StateCodec, AcceptsAHandBuiltSharedTable) {
  // { [true] = <self> } with the table marked shared: the format as documented.
  const std::string bytes = Snapshot(TableHeader(1, 0, '\x08') + std::string("\x02\x07\x00", 3));
  LuaHost::HostSection section(host.get(), L);
  std::string error;
  ASSERT_TRUE(DecodeState(L, bytes, &error)) << error;
  lua_setglobal(L, "back");
  EXPECT_TRUE(Eval("rawequal(back[true], back)"));
}

TEST_F(StateCodec, RefusesCountsThatOnlyAddUpPastTheEnd) {
  // 100 nested tables, each claiming 1,000 pairs: each alone fits in the
  // bytes left, together they do not. Refused before they are allocated.
  std::string body;
  for (int i = 0; i < 100; ++i) body += TableHeader(1000) + "\x02";
  body += std::string(2100, '\x00');
  const std::string error = DecodeError(Snapshot(body));
  EXPECT_NE(error.find("table count past the end"), std::string::npos) << error;
}

TEST_F(StateCodec, RefusesToDecodePastTheDepthLimit) {
  auto nested = [](int depth) {
    std::string body;
    for (int i = 1; i < depth; ++i) body += TableHeader(1) + "\x02";
    body += TableHeader(0);
    return Snapshot(body);
  };
  {
    LuaHost::HostSection section(host.get(), L);
    std::string error;
    ASSERT_TRUE(DecodeState(L, nested(kMaxStateDepth), &error)) << error;
    lua_pop(L, 1);
  }
  const std::string error = DecodeError(nested(kMaxStateDepth + 1));
  EXPECT_NE(error.find("nested more than 200 tables deep"), std::string::npos) << error;
}

// Version 2, which has no checksum: the structure checks alone keep a
// damaged snapshot from crashing or allocating past its size.
TEST_F(StateCodec, SurvivesFlippedBytes) {
  Do(kRandomState);
  const std::string good = Unchecked(Encode("v = random_state(11) v.again = v"));
  LuaHost::HostSection section(host.get(), L);
  std::mt19937 rng(7);
  int refused = 0, decoded = 0;
  for (int i = 0; i < 5000; ++i) {  // refused, or decoded into something that re-encodes
    std::string bad = good;
    for (int flips = 1 + static_cast<int>(rng() % 3); flips > 0; --flips) {
      bad[5 + rng() % (bad.size() - 5)] ^= static_cast<char>(1 + rng() % 255);
    }
    std::string error, again;
    if (DecodeState(L, bad, &error)) {
      ++decoded;
      EXPECT_TRUE(EncodeState(L, -1, &again, &error)) << error;
      lua_pop(L, 1);
    } else {
      ++refused;
      EXPECT_EQ(error.rfind("corrupt state snapshot: ", 0), 0u) << error;
    }
    ASSERT_EQ(lua_gettop(L), base);
  }
  EXPECT_GT(refused, 0);
}

// ---------------------------------------------------------------------------
// The checksum

TEST_F(StateCodec, WritesVersion4WithTheChecksumOfEverythingBefore) {
  const std::string bytes = Encode("v = { a = 1 }");
  ASSERT_GT(bytes.size(), 9u);
  EXPECT_EQ(bytes.substr(0, 5), std::string("LTST\x04", 5));
  const std::string_view body = std::string_view(bytes).substr(0, bytes.size() - 4);
  const uint32_t crc = Crc32c::Update(0, body);
  std::string trailer;
  for (int i = 0; i < 4; ++i) trailer += static_cast<char>(crc >> (8 * i));
  EXPECT_EQ(bytes.substr(bytes.size() - 4), trailer);
}

TEST_F(StateCodec, ReadsVersion2SnapshotsWithoutAChecksum) {
  // As 0.1.0 wrote them: the same stream, version byte 2, nothing after.
  Do(kRandomState);
  for (int seed = 1; seed <= 50; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::string v3 = Encode("v = random_state(" + std::to_string(seed) + ")");
    LuaHost::HostSection section(host.get(), L);
    std::string error;
    ASSERT_TRUE(DecodeState(L, Unchecked(v3), &error)) << error;
    lua_setglobal(L, "back");
    ASSERT_TRUE(Eval("same(v, back)"));
  }
  EXPECT_EQ(DecodeError(Checked(TableHeader(0)) + "x"), "corrupt state snapshot: checksum mismatch");
}

// A few hundred bytes with nested tables, a shared table, a cycle, strings
// long and short, every scalar kind.
constexpr const char* kSmallState = R"(
  local shared = { tag = "shared", list = { 1, 2, 3 } }
  v = { players = { { name = "ann", score = 1.5, tags = { "a", "b" } },
                    { name = "bob", score = -2, friend = shared } },
        shared = shared, flags = { [true] = false, [0.25] = "quarter" },
        text = ("lorem ipsum "):rep(6), bytes = "\0\1\255", big = math.mininteger }
  v.self = v
  shared.back = v.players)";

TEST_F(StateCodec, RefusesEverySingleBitFlip) {
  const std::string good = Encode(kSmallState);
  ASSERT_GT(good.size(), 200u);
  ASSERT_LT(good.size(), 1000u);
  int flips = 0;
  for (size_t byte = 0; byte < good.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      SCOPED_TRACE("bit " + std::to_string(bit) + " of byte " + std::to_string(byte));
      std::string bad = good;
      bad[byte] ^= static_cast<char>(1 << bit);
      LuaHost::HostSection section(host.get(), L);
      std::string error;
      CodecFailure failure = CodecFailure::kNone;
      ASSERT_FALSE(DecodeState(L, bad, &error, &failure));
      EXPECT_EQ(failure, CodecFailure::kCorrupt) << error;
      ASSERT_EQ(lua_gettop(L), base);
      ++flips;
    }
  }
  EXPECT_EQ(flips, static_cast<int>(8 * good.size()));
}

TEST_F(StateCodec, ClassifiesEveryDecodeFailureAsCorrupt) {
  const std::string rows[] = {"",
                              "XXXX\x03",
                              "LTS",
                              Snapshot("\x02", 9),
                              Snapshot("\x02", 3),
                              Checked("") + "",
                              Checked("\x0b"),
                              Checked(TableHeader(3) + "\x02\x02")};
  for (const std::string& bytes : rows) {
    LuaHost::HostSection section(host.get(), L);
    std::string error;
    CodecFailure failure = CodecFailure::kNone;
    EXPECT_FALSE(DecodeState(L, bytes, &error, &failure));
    EXPECT_EQ(failure, CodecFailure::kCorrupt) << error;
  }
}

// ---------------------------------------------------------------------------
// Slices

// Runs a job one check at a time: every clock read is 1 ms past the last, so
// a budget of 0 stops at every check. Returns the number of Steps.
template <typename Job>
int StepToEnd(Job* job, uint32_t interval = 1) {
  TickingClock clock;
  job->set_check_interval(interval);
  int steps = 1;
  while (job->Step(&clock, 0) == CodecProgress::kMore) ++steps;
  return steps;
}

TEST_F(StateCodec, ASlicedEncodeWritesTheOneShotBytes) {
  Do(kRandomState);
  int sliced = 0;  // states with more than one pair: more than one Step
  for (int seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::string whole = Encode("v = random_state(" + std::to_string(seed) + ") v.again = v");
    LuaHost::HostSection section(host.get(), L);
    lua_getglobal(L, "v");
    StateEncoder e(L, -1);
    lua_pop(L, 1);
    const int steps = StepToEnd(&e);
    ASSERT_EQ(e.progress(), CodecProgress::kDone) << e.error();
    EXPECT_EQ(e.bytes(), whole);
    if (steps > 1) ++sliced;
    EXPECT_EQ(lua_gettop(L), base);
  }
  EXPECT_GT(sliced, 150);
}

TEST_F(StateCodec, ASlicedDecodeBuildsWhatTheOneShotBuilds) {
  Do(kRandomState);
  int sliced = 0;
  for (int seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::string bytes = Encode("v = random_state(" + std::to_string(seed) + ") v.again = v");
    LuaHost::HostSection section(host.get(), L);
    StateDecoder d(L, bytes);
    const int steps = StepToEnd(&d);
    ASSERT_EQ(d.progress(), CodecProgress::kDone) << d.error();
    if (steps > 1) ++sliced;
    d.PushResult(L);
    lua_setglobal(L, "back");
    ASSERT_TRUE(Eval("same(v, back)"));
    EXPECT_EQ(lua_gettop(L), base);
  }
  EXPECT_GT(sliced, 150);
}

TEST_F(StateCodec, AStepDoesAnIntervalOfWorkBetweenClockReads) {
  Do("v = {} for i = 1, 100000 do v[i] = { i } end");
  LuaHost::HostSection section(host.get(), L);
  lua_getglobal(L, "v");
  StateEncoder e(L, -1);
  lua_pop(L, 1);
  FakeClock clock;  // stands still: a budget of 0 is spent at the first read
  int steps = 1;
  while (e.Step(&clock, 0) == CodecProgress::kMore) ++steps;
  ASSERT_EQ(e.progress(), CodecProgress::kDone);
  // 200,000 pairs, a clock read every 4,096: about 49 slices, plus the checksum's.
  EXPECT_GE(steps, 40);
  EXPECT_LE(steps, 80);
  // With the budget not spent, one Step does it all.
  lua_getglobal(L, "v");
  StateEncoder whole(L, -1);
  lua_pop(L, 1);
  EXPECT_EQ(whole.Step(&clock, 1'000'000'000), CodecProgress::kDone);
  EXPECT_EQ(whole.bytes(), e.bytes());
}

TEST_F(StateCodec, ASlicedEncodeNamesTheSamePathAsTheOneShot) {
  const char* rows[] = {
      "v = { players = { {}, {}, { onHit = function() end } } }",
      "v = { list = { 1, 2, { ok = true }, { bad = { print } } } }",
      "v = { [{ inner = { print } }] = 1 }",
      "v = { inner = { [print] = 1 } }",
  };
  for (const char* row : rows) {
    SCOPED_TRACE(row);
    const std::string whole = EncodeError(row);
    LuaHost::HostSection section(host.get(), L);
    lua_getglobal(L, "v");
    StateEncoder e(L, -1);
    lua_pop(L, 1);
    StepToEnd(&e);
    EXPECT_EQ(e.progress(), CodecProgress::kFailed);
    EXPECT_EQ(e.error(), whole);
    EXPECT_EQ(e.failure(), CodecFailure::kValue);
    EXPECT_TRUE(e.bytes().empty());
  }
}

TEST_F(StateCodec, ASlicedDecodeRefusesWhatTheOneShotRefuses) {
  Do(kRandomState);
  const std::string good = Encode("v = random_state(5) v.again = v");
  std::vector<std::string> bad;
  for (size_t n = 0; n < good.size() - 4; n += 7) bad.push_back(Unchecked(good).substr(0, n));
  bad.push_back(Snapshot(TableHeader(0xffffffff)));
  bad.push_back(Snapshot(TableHeader(1) + std::string("\x02\x07\x00", 3)));
  std::string deep;
  for (int i = 0; i <= kMaxStateDepth; ++i) deep += TableHeader(1) + "\x02";
  bad.push_back(Snapshot(deep + TableHeader(0)));
  std::string good_flipped = good;
  good_flipped[good.size() / 2] ^= 4;
  bad.push_back(good_flipped);
  for (const std::string& bytes : bad) {
    const std::string whole = DecodeError(bytes);
    LuaHost::HostSection section(host.get(), L);
    StateDecoder d(L, bytes);
    StepToEnd(&d);
    EXPECT_EQ(d.progress(), CodecProgress::kFailed);
    EXPECT_EQ(d.error(), whole);
    EXPECT_EQ(lua_gettop(L), base);
  }
}

// The checksum of a large snapshot takes slices of its own, and a mismatch
// is found before anything is built.
TEST_F(StateCodec, TheChecksumIsCheckedInSlicesBeforeAnyTableIsBuilt) {
  std::string bytes = Encode("v = { s = ('x'):rep(4 << 20), t = { 1, 2, 3 } }");
  bytes[bytes.size() - 10] ^= 1;  // the last pairs: the structure alone reads fine
  LuaHost::HostSection section(host.get(), L);
  lua_gc(L, LUA_GCCOLLECT);
  const int before = lua_gc(L, LUA_GCCOUNT);
  StateDecoder d(L, bytes);
  FakeClock clock;
  int steps = 1;
  while (d.Step(&clock, 0) == CodecProgress::kMore) ++steps;
  EXPECT_EQ(d.error(), "corrupt state snapshot: checksum mismatch");
  EXPECT_GE(steps, 4);                                               // 1 MiB a slice
  EXPECT_LT(lua_gc(L, LUA_GCCOUNT) - before, 64) << "KB allocated";  // not the 4 MB string
}

TEST_F(StateCodec, TheDecoderStopsTheCollectorUntilItEnds) {
  Do("v = { { 1 }, { 2 }, { 3 } }");
  const std::string bytes = Encode("");
  {
    LuaHost::HostSection section(host.get(), L);
    StateDecoder d(L, bytes);
    d.set_check_interval(1);
    TickingClock clock;
    EXPECT_EQ(d.Step(&clock, 0), CodecProgress::kMore);
    EXPECT_EQ(lua_gc(L, LUA_GCISRUNNING), 0);
    EXPECT_EQ(d.Finish(), CodecProgress::kDone);
    EXPECT_EQ(lua_gc(L, LUA_GCISRUNNING), 1);
    d.PushResult(L);
    lua_pop(L, 1);
  }
  {
    LuaHost::HostSection section(host.get(), L);
    StateDecoder d(L, bytes);
    d.set_check_interval(1);
    TickingClock clock;
    EXPECT_EQ(d.Step(&clock, 0), CodecProgress::kMore);
    EXPECT_EQ(lua_gc(L, LUA_GCISRUNNING), 0);
  }  // dropped half done
  EXPECT_EQ(lua_gc(L, LUA_GCISRUNNING), 1);
  EXPECT_EQ(DecodeError(Checked("\x0b")), "corrupt state snapshot: unknown value tag 11 at byte 5");
  EXPECT_EQ(lua_gc(L, LUA_GCISRUNNING), 1);
}

// Dropped half done, a job leaves nothing behind: no stack slot, no
// registry slot, no memory once collected.
TEST_F(StateCodec, AJobDroppedHalfDoneFreesEverything) {
  Do("v = {} for i = 1, 20000 do v[i] = { name = 'n' .. i, i } end");
  const std::string bytes = Encode("");
  LuaHost::HostSection section(host.get(), L);
  lua_gc(L, LUA_GCCOLLECT);
  const int before = lua_gc(L, LUA_GCCOUNT);
  // A registry slot taken now is the first free one: the same after the jobs
  // if they gave theirs back.
  lua_pushboolean(L, 1);
  const int probe = luaL_ref(L, LUA_REGISTRYINDEX);
  luaL_unref(L, LUA_REGISTRYINDEX, probe);
  for (int stop_after : {1, 10, 30}) {
    SCOPED_TRACE(stop_after);
    {
      StateDecoder d(L, bytes);
      d.set_check_interval(1000);
      TickingClock clock;
      for (int i = 0; i < stop_after; ++i) ASSERT_EQ(d.Step(&clock, 0), CodecProgress::kMore);
      // The first slices check the checksum (256 KB each); later ones build.
      if (stop_after >= 10) {
        EXPECT_GT(lua_gc(L, LUA_GCCOUNT) - before, 50) << "KB: the tables built so far";
      }
    }
    {
      lua_getglobal(L, "v");
      StateEncoder e(L, -1);
      lua_pop(L, 1);
      e.set_check_interval(1000);
      TickingClock clock;
      for (int i = 0; i < stop_after; ++i) ASSERT_EQ(e.Step(&clock, 0), CodecProgress::kMore);
    }
    EXPECT_EQ(lua_gettop(L), base);
    EXPECT_EQ(lua_gc(L, LUA_GCISRUNNING), 1);
    lua_gc(L, LUA_GCCOLLECT);
    lua_gc(L, LUA_GCCOLLECT);
    EXPECT_LT(lua_gc(L, LUA_GCCOUNT) - before, 16) << "KB still held";
    lua_pushboolean(L, 1);
    const int again = luaL_ref(L, LUA_REGISTRYINDEX);
    luaL_unref(L, LUA_REGISTRYINDEX, again);
    EXPECT_EQ(again, probe);
  }
}

}  // namespace
}  // namespace lua_tasks
