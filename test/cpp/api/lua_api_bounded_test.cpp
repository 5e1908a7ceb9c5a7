// SPDX-License-Identifier: MIT
// Tests for the bounded library functions: each long call stops at the deadline; results stay Lua's.
#include "core/api/lua_api_bounded.hpp"
#include "core/api/lua_api_pattern.hpp"

#include <string>

#include <gtest/gtest.h>

#include "test_clocks.hpp"
#include "test_hosts.hpp"

namespace lua_tasks {
namespace {

constexpr int64_t kMs = 1'000'000;

// The clock moves 1 ms a read: a function that checks as it works runs the
// 50 ms budget out after about 50 checks, in no real time to speak of.
std::unique_ptr<LuaHost> MakeHost(const Clock* clock, int64_t timeout_ns) {
  LuaHostOptions o;
  o.task_timeout_ns = timeout_ns;
  o.clock = clock;
  o.install_apis = RegisterPatternApi;  // as a runtime has them: gsub is stopped too
  return CreateHost(o);
}

struct LongCall {
  const char* name;
  const char* call;
};

// Each one ran for minutes or more in Lua's own library (or, for the
// C-function reader and collectgarbage, never once reached a hook).
const LongCall kLongCalls[] = {
    {"TableMove", "table.move({}, 1, 2^40, 2)"},
    {"TableMoveBackwards", "local t = {} table.move(t, 1, 2^40, 2, t)"},
    {"TableInsertWithHugeLen", "table.insert(setmetatable({}, {__len = function() return 2^40 end}), 1, 0)"},
    {"TableRemoveWithHugeLen", "table.remove(setmetatable({}, {__len = function() return 2^40 end}), 1)"},
    {"TableUnpackThroughAnIndexChain",
     "local t = {} local c = t for i = 1, 1990 do local n = {} setmetatable(c, {__index = n}) c = n end "
     "table.unpack(t, 1, 999000)"},
    {"TableConcatOfCFunctionIndex", "table.concat(setmetatable({}, {__index = tostring}), '', 1, 2^40)"},
    {"TableSortOfLongEqualStrings",
     "local s = string.rep('x', 4 << 20) local t = {} for i = 1, 4000 do t[i] = s end table.sort(t)"},
    {"TableSortWithACFunctionComparator", "local t = {} for i = 1, 3e5 do t[i] = i end table.sort(t, rawequal)"},
    {"StringRepLong", "string.rep('x', 32 << 20)"},
    {"StringRepWithSeparator", "string.rep('ab', 16 << 20, ',')"},
    {"StringUpper", "string.upper(string.rep('x', 32 << 20))"},
    {"StringReverse", "string.reverse(string.rep('x', 32 << 20))"},
    {"StringFormatOfPercents", "string.format(string.rep('%%', 16 << 20))"},
    {"StringFormatQuoted", "string.format('%q', string.rep('\\0', 16 << 20))"},
    {"StringFormatManyItems",
     "string.format(string.rep('%d', 2e5), table.unpack(setmetatable({}, {__index = function() return 1 end}), 1, "
     "2e5))"},
    {"StringPackPadding", "string.pack('c' .. (256 << 20), '')"},
    {"StringPackManyOptions", "string.pack(string.rep('x', 16 << 20))"},
    {"StringPacksize", "string.packsize(string.rep('b', 16 << 20))"},
    {"StringUnpackManyOptions", "local s = string.rep('x', 16 << 20) string.unpack(s, s)"},
    {"Utf8Len", "utf8.len(string.rep('\\u{20AC}', 8 << 20))"},
    {"Utf8Offset", "utf8.offset(string.rep('a', 32 << 20), 2^40)"},
    {"OsDate", "os.date(string.rep('%Y', 4 << 20), 0)"},
    {"LoadBigChunk", "load(string.rep('a = 1 ', 4 << 20))"},
    {"LoadEndlessReader", "load(os.time)"},
    {"LoadEndlessLuaReader", "load(function() return 'a = 1 ' end)"},
    {"TonumberInBase", "tonumber(string.rep('1', 64 << 20), 10)"},
    {"CollectgarbageInALoop", "while true do collectgarbage() end"},
    {"GsubWithACFunctionReplacement", "string.gsub(string.rep('x', 16 << 20), '.', string.upper)"},
};

class LongCallTest : public ::testing::TestWithParam<LongCall> {};

TEST_P(LongCallTest, StopsAtTheDeadlineThroughPcallAndTheRuntimeGoesOn) {
  TickingClock clock;
  auto host = MakeHost(&clock, 50 * kMs);
  const std::string src = std::string("local ok, e = pcall(function() ") + GetParam().call + " end) return 'survived'";
  const std::string out = RunLua(host.get(), src);
  EXPECT_NE(out.find("CPU budget exceeded (taskTimeout 50 ms)"), std::string::npos) << out;
  EXPECT_TRUE(host->last_killed()) << out;
  EXPECT_EQ(RunLua(host.get(), "return ('a,b'):rep(2, ';')"), "ok:a,b;a,b");
}

INSTANTIATE_TEST_SUITE_P(Bounded, LongCallTest, ::testing::ValuesIn(kLongCalls),
                         [](const ::testing::TestParamInfo<LongCall>& p) { return p.param.name; });

TEST(Bounded, StringRepOfEmptyCopiesIsImmediate) {
  // n empty copies took n memcpy calls (rep("", 2^40): hours).
  auto host = MakeHost(nullptr, 0);
  EXPECT_EQ(RunLua(host.get(), "return #string.rep('', 2^40) + #string.rep('', 2^40, '')"), "ok:0");
}

TEST(Bounded, StringRepRepeatsExactlyAcrossItsCopyChunks) {
  auto host = MakeHost(nullptr, 0);
  // Units that do not divide the 1 MB copy chunk, with and without a separator.
  EXPECT_EQ(RunLua(host.get(), R"(
    for _, c in ipairs({{"abc", 700000, "de"}, {"xyz", 500000, ""}, {"q", 3, ","}, {"ab", 1, "--"}}) do
      local s, n, sep = c[1], c[2], c[3]
      local r = string.rep(s, n, sep)
      if #r ~= #s * n + #sep * (n - 1) then return "length " .. #r end
      local unit = s .. sep
      for i = 0, n - 2, 9973 do
        if r:sub(i * #unit + 1, (i + 1) * #unit) ~= unit then return "copy " .. i end
      end
      if r:sub(-#s) ~= s then return "last" end
    end
    return "same")"),
            "ok:same");
}

TEST(Bounded, TableSortOrdersEveryShapeOfInput) {
  auto host = MakeHost(nullptr, 0);
  EXPECT_EQ(RunLua(host.get(), R"(
    local function check(t, lt)
      for i = 2, #t do
        if lt then if lt(t[i], t[i - 1]) then return false end
        elseif t[i] < t[i - 1] then return false end
      end
      return true
    end
    local shapes = {
      function(i, n) return i end, function(i, n) return n - i end, function(i) return 7 end,
      function(i) return (i * 7919) % 1009 end, function(i, n) return i % 2 == 0 and i or n - i end,
      function(i) return i % 5 end,
    }
    for _, n in ipairs({0, 1, 2, 3, 12, 13, 14, 100, 5000}) do
      for k, shape in ipairs(shapes) do
        local t = {} for i = 1, n do t[i] = shape(i, n) end
        table.sort(t)
        if not check(t) then return "shape " .. k .. " n " .. n end
        table.sort(t, function(a, b) return a > b end)
        if not check(t, function(a, b) return a > b end) then return "desc " .. k .. " n " .. n end
      end
    end
    return "sorted")"),
            "ok:sorted");
}

TEST(Bounded, AnInconsistentComparatorRaisesOrLeavesSomeOrderButNeverLeavesTheRange) {
  auto host = MakeHost(nullptr, 0);
  EXPECT_EQ(RunLua(host.get(), R"(
    local t = {} for i = 1, 1000 do t[i] = i end
    local ok, e = pcall(table.sort, t, function() return true end)
    if ok or not e:find("invalid order function for sorting") then return "always true: " .. tostring(e) end
    local seed = 1
    local ok2 = pcall(table.sort, t, function() seed = (seed * 75) % 65537 return seed % 2 == 0 end)
    local n = 0 for k in pairs(t) do n = n + 1 end
    return n)"),
            "ok:1000");
}

TEST(Bounded, AHeavilyLopsidedSortFallsBackToHeapsort) {
  // A comparator that makes every partition lopsided (each pivot ends up
  // next to a border) would cost quadratic time; the depth limit hands such
  // a range to heapsort. Counted in comparisons.
  auto host = MakeHost(nullptr, 0);
  EXPECT_EQ(RunLua(host.get(), R"(
    local n, calls = 20000, 0
    local t = {} for i = 1, n do t[i] = i end
    table.sort(t, function(a, b) calls = calls + 1 return a < b end)
    for i = 1, n do if t[i] ~= i then return "order" end end
    return calls < n * 60)"),
            "ok:true");
}

TEST(Bounded, FormatAndPackKeepLuasResults) {
  auto host = MakeHost(nullptr, 0);
  EXPECT_EQ(RunLua(host.get(), R"(return string.format("%5.2f|%-4d|%q|%s|%x", 3.14159, 7, "a\n\0b", nil, 255))"),
            "ok: 3.14|7   |\"a\\\n\\0b\"|nil|ff");
  EXPECT_EQ(
      RunLua(host.get(), R"(return select("#", string.unpack("i4 z s2", string.pack("i4 z s2", -5, "ab", "cde"))))"),
      "ok:4");
  EXPECT_EQ(RunLua(host.get(), "return (string.unpack('<i3', string.pack('<i3', -70000)))"), "ok:-70000");
  EXPECT_EQ(RunLua(host.get(), "return string.format('%d', 1.5)"),
            "err:test:1: bad argument #2 to 'format' (number has no integer representation)");
  EXPECT_EQ(RunLua(host.get(), "return string.pack('c2', 'abc')"),
            "err:test:1: bad argument #2 to 'pack' (string longer than given size)");
}

// Regression: os.time() read glibc's coarse clock, a kernel tick
// behind the scheduler's, so a task woken at t by UNTIL_TIME saw t - 1.
TEST(Bounded, OsTimeAndOsDateReadTheHostsWallClock) {
  FakeClock clock;
  clock.wall = int64_t{86400} * 20000 * 1000 * kMs + kMs;  // 1 ms past midnight UTC, 2024-10-04
  auto host = MakeHost(&clock, 0);
  EXPECT_EQ(RunLua(host.get(), "return os.time()"), "ok:1728000000");
  EXPECT_EQ(RunLua(host.get(), "return os.time(nil)"), "ok:1728000000");
  EXPECT_EQ(RunLua(host.get(), "return os.date('!%Y-%m-%d %H:%M:%S')"), "ok:2024-10-04 00:00:00");
  EXPECT_EQ(RunLua(host.get(), "return os.date('!*t').day"), "ok:4");
  EXPECT_EQ(RunLua(host.get(), "return os.date() == os.date('%c', os.time())"), "ok:true");
  clock.wall -= 2 * kMs;  // 1 ms before midnight: still the day before
  EXPECT_EQ(RunLua(host.get(), "return os.time()"), "ok:1727999999");
  EXPECT_EQ(RunLua(host.get(), "return os.date('!%d')"), "ok:03");
}

TEST(Bounded, OsTimeAndOsDateWithArgumentsKeepLuasMeaning) {
  FakeClock clock;
  auto host = MakeHost(&clock, 0);
  EXPECT_EQ(RunLua(host.get(), "return os.date('!%Y-%m-%d %H:%M:%S', 86400)"), "ok:1970-01-02 00:00:00");
  EXPECT_EQ(RunLua(host.get(), "local t = os.time() return os.time(os.date('*t', t)) == t"), "ok:true");
  EXPECT_EQ(RunLua(host.get(),
                   "return os.time({year = 2000, month = 1, day = 1, hour = 12}) - "
                   "os.time({year = 2000, month = 1, day = 2, hour = 12})"),
            "ok:-86400");
  EXPECT_EQ(RunLua(host.get(), "return os.time('x')"),
            "err:test:1: bad argument #1 to 'time' (table expected, got string)");
  EXPECT_EQ(RunLua(host.get(), "return os.time({year = 2000, month = 1})"), "err:field 'day' missing in date table");
}

TEST(Bounded, LoadKeepsItsArgumentsAndEnv) {
  auto host = MakeHost(nullptr, 0);
  EXPECT_EQ(RunLua(host.get(), "return load('return x', 'c', 't', {x = 7})()"), "ok:7");
  EXPECT_EQ(RunLua(host.get(), R"(
    local parts, i = {"return ", ("1 + "):rep(5000), "1"}, 0
    return load(function() i = i + 1 return parts[i] end)())"),
            "ok:5001");
  EXPECT_EQ(RunLua(host.get(), "return select(2, load(function() return {} end))"),
            "ok:lua-tasks/text_only.lua:16: reader function must return a string");
}

TEST(Bounded, ALongLoadIsStoppedButItsStopCannotBeKept) {
  // load catches errors from its reader and returns them: the stop is
  // raised again at the caller's next instruction.
  TickingClock clock;
  auto host = MakeHost(&clock, 50 * kMs);
  const std::string out =
      RunLua(host.get(), "local f, e = load(string.rep('a = 1 ', 4 << 20)) x = e return 'survived'");
  EXPECT_NE(out.find("CPU budget exceeded"), std::string::npos) << out;
  EXPECT_EQ(RunLua(host.get(), "return x"), "ok:nil");
}

}  // namespace
}  // namespace lua_tasks
