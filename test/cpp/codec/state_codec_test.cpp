// SPDX-License-Identifier: MIT
// Tests for the state codec: round trips, sharing and cycles, values that cannot persist.
#include "core/codec/state_codec.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codec/state_codec_fixture.hpp"

namespace lua_tasks {
namespace {

using namespace state_codec_testing;  // the fixture (state_codec_fixture.hpp)

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

}  // namespace
}  // namespace lua_tasks
