// SPDX-License-Identifier: MIT
// Tests for PatternMatcher and our string.find/match/gmatch/gsub: stock Lua 5.4's behaviour, but stoppable.
#include "core/api/lua_pattern.hpp"

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "core/api/lua_api_pattern.hpp"
#include "core/host/lua_host.hpp"
#include "test_clocks.hpp"
#include "test_hosts.hpp"

namespace lua_tasks {
namespace {

// ser(...) turns results into text without any pattern function; collect(f)
// gathers what a gmatch iterator gives.
constexpr const char kPrelude[] =
    R"lua(-- ser(...): values as text, with no pattern function (the functions under test).
function ser(...)
  local out = {}
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if type(v) == "string" then
      local b = {}
      for j = 1, #v do
        local c = v:byte(j)
        b[j] = (c >= 32 and c <= 126 and c ~= 34 and c ~= 92) and string.char(c) or ("\\" .. c)
      end
      out[i] = '"' .. table.concat(b) .. '"'
    else
      out[i] = tostring(v)
    end
  end
  return table.concat(out, ",")
end
-- collect(iterator): every tuple a gmatch iterator gives (at most 50).
function collect(f)
  local out = {}
  for _ = 1, 50 do
    local r = table.pack(f())
    if r[1] == nil then break end
    out[#out + 1] = "{" .. ser(table.unpack(r, 1, r.n)) .. "}"
  end
  return table.concat(out, " ")
end
)lua";

// A stop callback that counts how often it is asked, and says stop at the
// `stop_at`th time (0: never).
struct FakeStop {
  int checks = 0;
  int stop_at = 0;
  static bool ShouldStop(void* ctx) {
    auto* self = static_cast<FakeStop*>(ctx);
    return ++self->checks == self->stop_at;
  }
  static int Raise(void* ctx, lua_State* L) {
    return luaL_error(L, "stopped after %d checks", static_cast<FakeStop*>(ctx)->checks);
  }
};

// One state with both sets of functions: `stock` (Lua's own, from
// luaL_openlibs) and `ours`, side by side, so that every case can run on both.
class PatternTest : public ::testing::Test {
 protected:
  void SetUp() override {
    L = luaL_newstate();
    luaL_openlibs(L);
    ASSERT_EQ(luaL_loadbuffer(L, kPrelude, sizeof(kPrelude) - 1, "=prelude"), LUA_OK);
    ASSERT_EQ(lua_pcall(L, 0, 0, 0), LUA_OK);
    lua_newtable(L);
    lua_getglobal(L, "string");
    for (const char* name : {"find", "match", "gmatch", "gsub"}) {
      lua_getfield(L, -1, name);
      lua_setfield(L, -3, name);
    }
    lua_pop(L, 1);
    lua_setglobal(L, "stock");
    lua_newtable(L);
    RegisterPatternFunctions(L, -1, PatternStop{FakeStop::ShouldStop, FakeStop::Raise, &stop});
    lua_setglobal(L, "ours");
  }
  void TearDown() override { lua_close(L); }

  // Runs `expr` with S = the named function table; returns ser(pcall(expr)).
  std::string Run(const std::string& expr, const char* set) {
    const std::string chunk =
        "local S = " + std::string(set) + " return ser(pcall(function() return " + expr + " end))";
    if (luaL_loadbuffer(L, chunk.data(), chunk.size(), "=row") != LUA_OK || lua_pcall(L, 0, 1, 0) != LUA_OK) {
      std::string err = lua_tostring(L, -1);
      lua_pop(L, 1);
      return "chunk failed: " + err;
    }
    size_t n;
    const char* s = lua_tolstring(L, -1, &n);
    std::string out(s, n);
    lua_pop(L, 1);
    return out;
  }

  FakeStop stop;
  lua_State* L = nullptr;
};

// ---- features and errors, one row each --------------------------------------
// Each expected value is what stock Lua 5.4.4 gives (the test checks that too).

TEST_F(PatternTest, EveryFeatureAndErrorGivesWhatStockLuaGives) {
  const std::pair<const char*, const char*> rows[] = {
      {R"lua(S.find('hello 123', '%d+'))lua", "true,7,9"},
      {R"lua(S.find('hello 123', '(%d)(%d)'))lua", "true,7,8,\"1\",\"2\""},
      {R"lua(S.find('abc', '()b()'))lua", "true,2,2,2,3"},
      {R"lua(S.find('a.b', '.', 1, true))lua", "true,2,2"},
      {R"lua(S.find('a.b', '.', 2, 1))lua", "true,2,2"},
      {R"lua(S.find('a+b', '+', 1, false))lua", "true,2,2"},
      {R"lua(S.find('a)b', 'a)'))lua", "true,1,2"},
      {R"lua(S.find('a.b', '%.'))lua", "true,2,2"},
      {R"lua(S.find('abcabc', 'b', -2))lua", "true,5,5"},
      {R"lua(S.find('abc', 'b', -10))lua", "true,2,2"},
      {R"lua(S.find('abc', 'a', 0))lua", "true,1,1"},
      {R"lua(S.find('abc', 'c', math.mininteger))lua", "true,3,3"},
      {R"lua(S.find('abc', '', 4))lua", "true,4,3"},
      {R"lua(S.find('abc', '', 5))lua", "true,nil"},
      {R"lua(S.find('abc', '', math.maxinteger))lua", "true,nil"},
      {R"lua(S.find('abc', 'x', 5, true))lua", "true,nil"},
      {R"lua(S.find('', ''))lua", "true,1,0"},
      {R"lua(S.find('', '^$'))lua", "true,1,0"},
      {R"lua(S.find('abc', '^b'))lua", "true,nil"},
      {R"lua(S.find('abc', '^a'))lua", "true,1,1"},
      {R"lua(S.find('a\0b', '\0'))lua", "true,2,2"},
      {R"lua(S.find('a\0b', '%z'))lua", "true,2,2"},
      {R"lua(S.find('xz', '%z'))lua", "true,nil"},
      {R"lua(S.find(123.5, 3.5))lua", "true,3,5"},
      {R"lua(S.match('key = value', '(%w+)%s*=%s*(%w+)'))lua", "true,\"key\",\"value\""},
      {R"lua(S.match('  trim me  ', '^%s*(.-)%s*$'))lua", "true,\"trim me\""},
      {R"lua(S.match('hello', '(h)(e)(l)(l)(o)'))lua", "true,\"h\",\"e\",\"l\",\"l\",\"o\""},
      {R"lua(S.match('hello', '()ll()'))lua", "true,3,5"},
      {R"lua(S.match('hello', '((l)(l))'))lua", "true,\"ll\",\"l\",\"l\""},
      {R"lua(S.match('hello', 'l', -2))lua", "true,\"l\""},
      {R"lua(S.match('hello', ''))lua", "true,\"\""},
      {R"lua(S.match('hello', '$'))lua", "true,\"\""},
      {R"lua(S.match('a$b', 'a$b'))lua", "true,\"a$b\""},
      {R"lua(S.match('^b', '^^b'))lua", "true,\"^b\""},
      {R"lua(S.match('ab', 'a^b'))lua", "true,nil"},
      {R"lua(S.match('aaa', 'a-'))lua", "true,\"\""},
      {R"lua(S.match('aaa', 'a-$'))lua", "true,\"aaa\""},
      {R"lua(S.match('aaab', 'a*b'))lua", "true,\"aaab\""},
      {R"lua(S.match('b', 'a+b'))lua", "true,nil"},
      {R"lua(S.match('aab', 'a+b'))lua", "true,\"aab\""},
      {R"lua(S.match('ab', 'a?b'))lua", "true,\"ab\""},
      {R"lua(S.match('b', 'a?b'))lua", "true,\"b\""},
      {R"lua(S.match('aaa', '^(a-)(a*)$'))lua", "true,\"\",\"aaa\""},
      {R"lua(S.match('x]y', '[]]'))lua", "true,\"]\""},
      {R"lua(S.match('x^y', '[x^]+'))lua", "true,\"x^\""},
      {R"lua(S.match('^x', '[^^]'))lua", "true,\"x\""},
      {R"lua(S.match('a-z', '[a-]+'))lua", "true,\"a-\""},
      {R"lua(S.match('abc-', '[^%-]+'))lua", "true,\"abc\""},
      {R"lua(S.match('A1_b!', '[%w_]+'))lua", "true,\"A1_b\""},
      {R"lua(S.match('hello', '[^aeiou]+'))lua", "true,\"h\""},
      {R"lua(S.match('5', '[0-9]'))lua", "true,\"5\""},
      {R"lua(S.match('x-', '[%a-]+'))lua", "true,\"x-\""},
      {R"lua(S.match('b]', '[^]]+'))lua", "true,\"b\""},
      {R"lua(S.match('%]', '[%]]'))lua", "true,\"]\""},
      {R"lua(S.match('a%', '[a-%%]+'))lua", "true,nil"},
      {R"lua(S.match('Hello World', '%u%l+'))lua", "true,\"Hello\""},
      {R"lua(S.match(' \t\n\v\f\rx', '%s+'))lua", "true,\" \\9\\10\\11\\12\\13\""},
      {R"lua(S.match('a.,;!b', '%p+'))lua", "true,\".,;!\""},
      {R"lua(S.match('\1\31\127a', '%c+'))lua", "true,\"\\1\\31\\127\""},
      {R"lua(S.match('DEADbeefg', '%x+'))lua", "true,\"DEADbeef\""},
      {R"lua(S.match('ab c', '%g+'))lua", "true,\"ab\""},
      {R"lua(S.match('abc123', '%D+'))lua", "true,\"abc\""},
      {R"lua(S.match('abc123', '%A+'))lua", "true,\"123\""},
      {R"lua(S.match('a b', '%S+%s%S'))lua", "true,\"a b\""},
      {R"lua(S.match('a\0b', 'a\0b'))lua", "true,\"a\\0b\""},
      {R"lua(S.match('a\0b', 'a[\0]b'))lua", "true,\"a\\0b\""},
      {R"lua(S.match('a\0b', 'a.b'))lua", "true,\"a\\0b\""},
      {R"lua(S.match('a\0b', '.%c.'))lua", "true,\"a\\0b\""},
      {R"lua(S.match('a\0b\0', '%z'))lua", "true,\"\\0\""},
      {R"lua(S.match('\200\255', '%a'))lua", "true,nil"},
      {R"lua(S.match('\200\255', '[\128-\255]+'))lua", "true,\"\\200\\255\""},
      {R"lua(S.match('[[x]]', '%b[]'))lua", "true,\"[[x]]\""},
      {R"lua(S.match('f(a(b)c)d', '%b()'))lua", "true,\"(a(b)c)\""},
      {R"lua(S.match('(((', '%b()'))lua", "true,nil"},
      {R"lua(S.match('xaxbx', '%bxx'))lua", "true,\"xax\""},
      {R"lua(S.match('THE (quick) fox', '%f[%a]%a+'))lua", "true,\"THE\""},
      {R"lua(S.find('ab', '%f[%a]'))lua", "true,1,0"},
      {R"lua(S.find('ab', '%f[^%a]'))lua", "true,3,2"},
      {R"lua(S.find('ab', '%f[%z]'))lua", "true,3,2"},
      {R"lua(S.find('ab', '%f[\0]'))lua", "true,3,2"},
      {R"lua(S.find('', '%f[\0]'))lua", "true,nil"},
      {R"lua(S.gsub('THE (quick) fox', '%f[%a]%a+', 'W'))lua", "true,\"W (W) W\",3"},
      {R"lua(S.match('abcabc', '(abc)%1'))lua", "true,\"abc\""},
      {R"lua(S.match('xyyx', '(.)(.)%2%1'))lua", "true,\"x\",\"y\""},
      {R"lua(S.match('aa', '()a%1'))lua", "true,nil"},
      {R"lua(S.match('a\0a\0', '(a\0)%1'))lua", "true,\"a\\0\""},
      {R"lua(S.match(('a'):rep(300), ('a?'):rep(199)))lua",
       "true,"
       "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\""},
      {R"lua(collect(S.gmatch('one two  three', '%a+')))lua", "true,\"{\\34one\\34} {\\34two\\34} {\\34three\\34}\""},
      {R"lua(collect(S.gmatch('abc', '')))lua", "true,\"{\\34\\34} {\\34\\34} {\\34\\34} {\\34\\34}\""},
      {R"lua(collect(S.gmatch('abc', 'b*')))lua", "true,\"{\\34\\34} {\\34b\\34} {\\34\\34}\""},
      {R"lua(collect(S.gmatch('k=v, a=b', '(%w+)=(%w+)')))lua", "true,\"{\\34k\\34,\\34v\\34} {\\34a\\34,\\34b\\34}\""},
      {R"lua(collect(S.gmatch('^a^a', '^a')))lua", "true,\"{\\34^a\\34} {\\34^a\\34}\""},
      {R"lua(collect(S.gmatch('aaa', '^a')))lua", "true,\"\""},
      {R"lua(collect(S.gmatch('abcd', '.', 3)))lua", "true,\"{\\34c\\34} {\\34d\\34}\""},
      {R"lua(collect(S.gmatch('abcd', '.', -2)))lua", "true,\"{\\34c\\34} {\\34d\\34}\""},
      {R"lua(collect(S.gmatch('abcd', '.', 0)))lua", "true,\"{\\34a\\34} {\\34b\\34} {\\34c\\34} {\\34d\\34}\""},
      {R"lua(collect(S.gmatch('abcd', '.', 5)))lua", "true,\"\""},
      {R"lua(collect(S.gmatch('abcd', '', 5)))lua", "true,\"{\\34\\34}\""},
      {R"lua(collect(S.gmatch('abcd', '.', 10)))lua", "true,\"\""},
      {R"lua(collect(S.gmatch('abc', '()')))lua", "true,\"{1} {2} {3} {4}\""},
      {R"lua(collect(S.gmatch('a,b,,c', '([^,]*)')))lua", "true,\"{\\34a\\34} {\\34b\\34} {\\34\\34} {\\34c\\34}\""},
      {R"lua(collect(S.gmatch(12345, 3)))lua", "true,\"{\\343\\34}\""},
      {R"lua(S.gsub('hello world', 'o', '0'))lua", "true,\"hell0 w0rld\",2"},
      {R"lua(S.gsub('hello world', '(o)', '[%1]', 1))lua", "true,\"hell[o] world\",1"},
      {R"lua(S.gsub('hello', '', '-'))lua", "true,\"-h-e-l-l-o-\",6"},
      {R"lua(S.gsub('abc', 'b*', '-'))lua", "true,\"-a-c-\",3"},
      {R"lua(S.gsub('abc', '%w', '%0%0'))lua", "true,\"aabbcc\",3"},
      {R"lua(S.gsub('abc', '%w', '%1'))lua", "true,\"abc\",3"},
      {R"lua(S.gsub('abc', '%w', '%%'))lua", "true,\"%%%\",3"},
      {R"lua(S.gsub('hello world', '(%w+) (%w+)', '%2 %1'))lua", "true,\"world hello\",1"},
      {R"lua(S.gsub('abc', '()', '%1'))lua", "true,\"1a2b3c4\",4"},
      {R"lua(S.gsub('abc', '^a', 'X'))lua", "true,\"Xbc\",1"},
      {R"lua(S.gsub('aaa', '^a', 'X'))lua", "true,\"Xaa\",1"},
      {R"lua(S.gsub('abc', '^x', 'X'))lua", "true,\"abc\",0"},
      {R"lua(S.gsub('abc', 'x', 'y'))lua", "true,\"abc\",0"},
      {R"lua(S.gsub('abc', '.', {a = 1, b = false}))lua", "true,\"1bc\",3"},
      {R"lua(S.gsub('abc', '(.)()', {[1] = 'one', a = 'A'}))lua", "true,\"Abc\",3"},
      {R"lua(S.gsub('abc', '%w', function(c) return c:upper() end))lua", "true,\"ABC\",3"},
      {R"lua(S.gsub('abc', '(%w)', function(c) if c == 'b' then return nil end return c .. c end))lua",
       "true,\"aabcc\",3"},
      {R"lua(S.gsub('abc', '(%w)(%w)', function(a, b) return b .. a end))lua", "true,\"bac\",1"},
      {R"lua(S.gsub('abc', '.', function() return 1.5 end))lua", "true,\"1.51.51.5\",3"},
      {R"lua(S.gsub('abc', '.', function() end))lua", "true,\"abc\",3"},
      {R"lua(S.gsub('abc', '.', 'x', 0))lua", "true,\"abc\",0"},
      {R"lua(S.gsub('abc', '.', 'x', -1))lua", "true,\"abc\",0"},
      {R"lua(S.gsub('abc', '.', 'x', 2.0))lua", "true,\"xxc\",2"},
      {R"lua(S.gsub('abc', '.', 'x', 2))lua", "true,\"xxc\",2"},
      {R"lua(S.gsub(123, 2, 9))lua", "true,\"193\",1"},
      {R"lua(S.gsub('a\0b', '%z', '0'))lua", "true,\"a0b\",1"},
      {R"lua(S.gsub('a\0b', '\0', '%%\0'))lua", "true,\"a%\\0b\",1"},
      {R"lua(S.gsub('abc', '(a', 'x'))lua", "true,\"xbc\",1"},
      {R"lua(S.find('a', '%'))lua", "false,\"row:1: malformed pattern (ends with '%')\""},
      {R"lua(S.find('a', 'a%'))lua", "false,\"row:1: malformed pattern (ends with '%')\""},
      {R"lua(S.find('b', 'a%'))lua", "true,nil"},
      {R"lua(S.find('a', '[a'))lua", "false,\"row:1: malformed pattern (missing ']')\""},
      {R"lua(S.find('a', '[^'))lua", "false,\"row:1: malformed pattern (missing ']')\""},
      {R"lua(S.find('a', '[%'))lua", "false,\"row:1: malformed pattern (missing ']')\""},
      {R"lua(S.find('a', '[]'))lua", "false,\"row:1: malformed pattern (missing ']')\""},
      {R"lua(S.find('a', '[a%]'))lua", "false,\"row:1: malformed pattern (missing ']')\""},
      {R"lua(S.find('a', '%f'))lua", "false,\"row:1: missing '[' after '%f' in pattern\""},
      {R"lua(S.find('a', '%fa'))lua", "false,\"row:1: missing '[' after '%f' in pattern\""},
      {R"lua(S.find('a', '%f[a'))lua", "false,\"row:1: malformed pattern (missing ']')\""},
      {R"lua(S.find('a', '%b'))lua", "false,\"row:1: malformed pattern (missing arguments to '%b')\""},
      {R"lua(S.find('a', '%ba'))lua", "false,\"row:1: malformed pattern (missing arguments to '%b')\""},
      {R"lua(S.find('a', '(a)%2'))lua", "false,\"row:1: invalid capture index %2\""},
      {R"lua(S.find('a', '%0'))lua", "false,\"row:1: invalid capture index %0\""},
      {R"lua(S.find('a', '(a%1)'))lua", "false,\"row:1: invalid capture index %1\""},
      {R"lua(S.match('a', 'a)'))lua", "false,\"row:1: invalid pattern capture\""},
      {R"lua(S.find('a', '(a'))lua", "false,\"row:1: unfinished capture\""},
      {R"lua(S.match('a', '(()'))lua", "false,\"row:1: unfinished capture\""},
      {R"lua(S.find('a', ('('):rep(33)))lua", "false,\"row:1: too many captures\""},
      {R"lua(S.find('a', ('()'):rep(33)))lua", "false,\"row:1: too many captures\""},
      {R"lua(S.find('a', ('()'):rep(32)))lua",
       "true,1,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1"},
      {R"lua(S.find(('a'):rep(300), ('a?'):rep(200)))lua", "false,\"row:1: pattern too complex\""},
      {R"lua(S.find(('a'):rep(300), ('(a)?'):rep(100)))lua", "true,nil"},
      {R"lua(S.gsub('a', 'a', '%'))lua", "false,\"row:1: invalid use of '%' in replacement string\""},
      {R"lua(S.gsub('a', 'a', 'x%'))lua", "false,\"row:1: invalid use of '%' in replacement string\""},
      {R"lua(S.gsub('a', 'a', '%x'))lua", "false,\"row:1: invalid use of '%' in replacement string\""},
      {R"lua(S.gsub('a', 'a', '%\0'))lua", "false,\"row:1: invalid use of '%' in replacement string\""},
      {R"lua(S.gsub('a', '(a)', '%2'))lua", "false,\"row:1: invalid capture index %2\""},
      {R"lua(S.gsub('a', 'a', '%2'))lua", "false,\"row:1: invalid capture index %2\""},
      {R"lua(S.gsub('a', '(a', '%1'))lua", "false,\"row:1: unfinished capture\""},
      {R"lua(S.gsub('abc', '(a', {}))lua", "false,\"row:1: unfinished capture\""},
      {R"lua(S.gsub('a', 'a', {a = {}}))lua", "false,\"row:1: invalid replacement value (a table)\""},
      {R"lua(S.gsub('a', 'a', {a = true}))lua", "false,\"row:1: invalid replacement value (a boolean)\""},
      {R"lua(S.gsub('a', 'a', function() return {} end))lua", "false,\"row:1: invalid replacement value (a table)\""},
      {R"lua(S.gsub('a', 'a'))lua",
       "false,\"row:1: bad argument #3 to 'gsub' (string/function/table expected, got no value)\""},
      {R"lua(S.gsub('a', 'a', true))lua",
       "false,\"row:1: bad argument #3 to 'gsub' (string/function/table expected, got boolean)\""},
      {R"lua(S.gsub('a', 'a', nil, 'x'))lua",
       "false,\"row:1: bad argument #4 to 'gsub' (number expected, got string)\""},
      {R"lua(S.gsub('a', 'a', 'b', 1.5))lua",
       "false,\"row:1: bad argument #4 to 'gsub' (number has no integer representation)\""},
      {R"lua(S.find(nil, 'a'))lua", "false,\"row:1: bad argument #1 to 'find' (string expected, got nil)\""},
      {R"lua(S.find('a'))lua", "false,\"row:1: bad argument #2 to 'find' (string expected, got no value)\""},
      {R"lua(S.find('a', 'a', 'x'))lua", "false,\"row:1: bad argument #3 to 'find' (number expected, got string)\""},
      {R"lua(S.find('a', 'a', 1.5))lua",
       "false,\"row:1: bad argument #3 to 'find' (number has no integer representation)\""},
      {R"lua(S.match('a', {}))lua", "false,\"row:1: bad argument #2 to 'match' (string expected, got table)\""},
      {R"lua(S.gmatch('a'))lua", "false,\"row:1: bad argument #2 to 'gmatch' (string expected, got no value)\""},
      {R"lua(S.gmatch('a', 'a', {}))lua", "false,\"row:1: bad argument #3 to 'gmatch' (number expected, got table)\""},
      {R"lua(collect(S.gmatch('a', '%')))lua", "false,\"prelude:23: malformed pattern (ends with '%')\""},
      {R"lua(collect(S.gmatch('a', '(a')))lua", "false,\"prelude:23: unfinished capture\""},
  };
  for (const auto& [expr, want] : rows) {
    EXPECT_EQ(Run(expr, "ours"), want) << expr;
    EXPECT_EQ(Run(expr, "stock"), want) << "stock Lua disagrees with the row: " << expr;
  }
}

// Every class, complemented class, escaped character and range, over all 256
// bytes (classes are the C locale's: no byte above 127 is in any).
TEST_F(PatternTest, ClassesAndSetsClassifyEveryByteLikeStockLua) {
  std::string items;
  for (const char c : std::string_view("acdglpsuwxzACDGLPSUWXZqB.%]-^[(_ ")) {
    for (const std::string fmt : {"%c", "[%c]", "[^%c]", "[%c_]"}) {
      std::string item = fmt;
      item.replace(item.find('c'), 1, 1, c);  // "%c" -> "%a", "[%c]" -> "[%a]", ...
      items += "'" + item + "', ";
    }
  }
  items += "'[\\0-\\31]', '[a-\\200]', '[\\200-\\255]', '[%a-z]', '[z-a]', '[^\\0]', '.', '[.]'";
  const std::string expr = R"((function()
      local all = {} for c = 0, 255 do all[#all + 1] = string.char(c) end
      all = table.concat(all)
      local out = {}
      for _, item in ipairs({)" +
                           items + R"(}) do
        out[#out + 1] = item .. "=" .. ser(S.gsub(all, item, ""))
      end
      return table.concat(out, "\n")
    end)())";
  const std::string ours = Run(expr, "ours");
  EXPECT_EQ(ours, Run(expr, "stock"));
  EXPECT_TRUE(ours.starts_with("true,")) << ours;  // no item raised
}

// ---- differential: generated cases against the stock functions --------------

// Pattern pieces: every construct, well and badly formed, so that generated
// patterns reach every error as well as every feature.
const std::vector<std::string>& Items() {
  static const std::vector<std::string> items = {
      "a",      "b",    "x",      " ",      std::string("\0", 1),
      ".",      "%a",   "%d",     "%s",     "%w",
      "%p",     "%u",   "%l",     "%x",     "%c",
      "%g",     "%z",   "%A",     "%S",     "%W",
      "%.",     "%%",   "%]",     "%-",     "%(",
      "[ab]",   "[^a]", "[a-c]",  "[%a_]",  "[]a]",
      "[^]b]",  "[a-]", "[%w%-]", "[",      "[^",
      "%b()",   "%bab", "%b",     "%f[%w]", "%f[^a]",
      "%f[%z]", "%fa",  "%f[",    "(",      ")",
      "()",     "(a)",  "(%a+)",  "(.-)",   "(()b)",
      "%1",     "%2",   "%0",     "%",      "^",
      "$",      "]",    "-",      "*",      "+",
      "?",
  };
  return items;
}

std::string Pick(std::mt19937& rng, std::string_view chars) {
  return std::string(1, chars[rng() % chars.size()]);
}

std::string MakePattern(std::mt19937& rng) {
  static constexpr const char* kQuantifiers[] = {"", "", "", "*", "+", "-", "?"};
  std::string p = rng() % 4 == 0 ? "^" : "";
  for (int i = 0, n = 1 + static_cast<int>(rng() % 5); i < n; ++i) {
    p += Items()[rng() % Items().size()];
    p += kQuantifiers[rng() % 7];
  }
  if (rng() % 4 == 0) p += '$';
  return p;
}

std::string MakeSubject(std::mt19937& rng) {
  static constexpr std::string_view kChars("aabbx ()[]%-^$.\0A1\n\200", 20);
  std::string s;
  if (rng() % 10 == 0) {
    for (int i = 0, n = static_cast<int>(rng() % 20); i < n; ++i) s += "ab";
    return s;
  }
  for (int i = 0, n = static_cast<int>(rng() % 13); i < n; ++i) s += Pick(rng, kChars);
  return s;
}

// Near the limits: nesting 200 deep ("pattern too complex") and 32 captures.
void MakeDeepCase(std::mt19937& rng, std::string* s, std::string* p) {
  static constexpr const char* kUnits[] = {"a?", "(a)", "()", "(a", "a-"};
  const char* unit = kUnits[rng() % 5];
  const int count =
      std::string_view(unit).size() == 2 ? 190 + static_cast<int>(rng() % 20) : 28 + static_cast<int>(rng() % 8);
  p->clear();
  for (int i = 0; i < count; ++i) *p += unit;
  s->assign(180 + rng() % 40, 'a');
}

// compare(s, p, init, repl, n): every function on both sets; nil when they
// agree, else both results.
constexpr const char kCompare[] = R"lua(
local s, p, init, repl, n = ...
local function run(S)
  return table.concat({
    ser(pcall(function() return S.find(s, p) end)),
    ser(pcall(function() return S.find(s, p, init) end)),
    ser(pcall(function() return S.find(s, p, init, true) end)),
    ser(pcall(function() return S.match(s, p, init) end)),
    ser(pcall(function() return collect(S.gmatch(s, p)) end)),
    ser(pcall(function() return collect(S.gmatch(s, p, init)) end)),
    ser(pcall(function() return S.gsub(s, p, repl, n) end)),
  }, "\n")
end
local a, b = run(stock), run(ours)
if a ~= b then return "stock:\n" .. a .. "\nours:\n" .. b end
)lua";

constexpr const char kReplacements[] = R"lua(
return {
  "%0", "%1", "%2", "[%1%2]", "x", "%%", "%", "%a", "", "%9", "%0%1",
  {a = "A", b = false, [1] = "one", [2] = 2.5, x = {}, [" "] = "_"},
  function(...)
    local a = ...
    if a == "a" then return false end
    if a == "b" then return nil end
    if a == "x" then return {} end
    if type(a) == "number" then return a * 2 end
    return "<" .. table.concat({...}, "|") .. ">"
  end,
}
)lua";

TEST_F(PatternTest, GeneratedCasesGiveWhatStockLuaGives) {
  ASSERT_EQ(luaL_loadbuffer(L, kReplacements, sizeof(kReplacements) - 1, "=replacements"), LUA_OK);
  ASSERT_EQ(lua_pcall(L, 0, 1, 0), LUA_OK);
  const int repls = lua_gettop(L);
  const int nrepl = static_cast<int>(lua_rawlen(L, repls));
  ASSERT_EQ(luaL_loadbuffer(L, kCompare, sizeof(kCompare) - 1, "=compare"), LUA_OK);
  const int compare = lua_gettop(L);
  std::mt19937 rng(20240601);
  constexpr int kCases = 20000;
  int mismatches = 0;
  for (int i = 0; i < kCases; ++i) {
    std::string s = MakeSubject(rng);
    std::string p = MakePattern(rng);
    if (i % 100 == 0) MakeDeepCase(rng, &s, &p);
    const int init = static_cast<int>(rng() % 31) - 15;
    const int repl = 1 + static_cast<int>(rng() % nrepl);
    const int n = static_cast<int>(rng() % 6) - 2;  // -2: no limit
    lua_pushvalue(L, compare);
    lua_pushlstring(L, s.data(), s.size());
    lua_pushlstring(L, p.data(), p.size());
    lua_pushinteger(L, init);
    lua_rawgeti(L, repls, repl);
    if (n == -2) {
      lua_pushnil(L);
    } else {
      lua_pushinteger(L, n);
    }
    ASSERT_EQ(lua_pcall(L, 5, 1, 0), LUA_OK) << lua_tostring(L, -1);
    if (!lua_isnil(L, -1) && ++mismatches <= 10) {
      ADD_FAILURE() << "case " << i << ": subject \"" << s << "\" pattern \"" << p << "\" init " << init << " repl #"
                    << repl << " n " << n << "\n"
                    << lua_tostring(L, -1);
    }
    lua_pop(L, 1);
  }
  EXPECT_EQ(mismatches, 0) << "of " << kCases;
  lua_settop(L, 0);
}

// ---- stopping ---------------------------------------------------------------

// Backtracking over 40,000 characters: each would run for minutes.
TEST_F(PatternTest, APathologicalMatchStopsWhenTheCheckSaysSo) {
  const char* const calls[] = {
      "S.find(s, p)",
      "S.match(s, p)",
      "collect(S.gmatch(s, p))",
      "S.gsub(s, p, 'x')",
      "S.gsub(s, p, function() end)",
      "S.find(s, p, 1, false)",
      "S.match(s .. 'c', 'a*c')",  // greedy: quadratic scanning
      "S.find(('x'):rep(1e5), '.-.-.-.-.-y')",
      "S.find(('('):rep(1e5), '%b()')",        // long scans inside %b
      "S.match(s .. s, '(' .. s .. ')%1%1')",  // long back-references
  };
  for (const char* call : calls) {
    stop = FakeStop{0, 3};
    const std::string expr =
        "(function() local s, p = ('a'):rep(40000), ('a-'):rep(30) .. 'b' return " + std::string(call) + " end)()";
    const std::string got = Run(expr, "ours");
    if (std::string_view(call).find("%1") != std::string_view::npos) {
      // Linear, so it may well finish first: it must not stop later than asked.
      EXPECT_LE(stop.checks, 3) << call;
      continue;
    }
    // At the line of the call: the row's, or for gmatch the prelude's collect.
    EXPECT_TRUE(got.starts_with("false,\"") && got.ends_with(": stopped after 3 checks\"")) << call << ": " << got;
    EXPECT_EQ(stop.checks, 3) << call;
  }
}

// Few steps, but each scans megabytes: the check is asked in proportion to
// the bytes scanned, so these stop too (each would run seconds unchecked).
TEST_F(PatternTest, AHugeSetCaptureOrTemplateIsCheckedByItsSize) {
  const char* const calls[] = {
      "S.find(s, set)",                            // the first item's end, then a candidate scan
      "S.find(s, 'x?' .. set)",                    // an item's end, at every start
      "S.match(s, set:sub(1, -2) .. 'a]*')",       // each character against the set
      "S.find(s, '%f' .. set)",                    // the frontier's set
      "S.gsub(s, '.', ('%0'):rep(1e6))",           // the replacement template
      "S.gsub(s, '(.)', ('%1'):rep(1e6))",         // with a capture
      "S.match(big .. big, '(' .. big .. ')%1')",  // a long back-reference
      "S.gsub(s, '.', ('x'):rep(1e6))",            // replacement output, across matches
      "S.gsub(s, '.', {a = ('x'):rep(1e6)})",
      "S.gsub(s, '()', ('%1'):rep(1e6))",         // a template that adds little
      "S.find(big .. big .. big, 'y', 1, true)",  // a plain search
      "S.find(big .. big .. big, 'y')",
  };
  for (const char* call : calls) {
    stop = FakeStop{0, 3};
    const std::string expr =
        "(function() local s, set, big = ('a'):rep(20), '[' .. ('b'):rep(4e6) .. ']', ('a'):rep(4e6) return " +
        std::string(call) + " end)()";
    const std::string got = Run(expr, "ours");
    EXPECT_TRUE(got.starts_with("false,\"") && got.ends_with(": stopped after 3 checks\""))
        << call << ": " << got.substr(0, 200);
    EXPECT_EQ(stop.checks, 3) << call;
  }
}

TEST_F(PatternTest, ALongMatchAsksTheCheckAndGoesOnWhileItSaysSo) {
  // About 4 million steps: a few thousand checks, then the stock result.
  const std::string expr = "S.find(('a'):rep(100), 'a-a-a-b')";
  EXPECT_EQ(Run(expr, "ours"), "true,nil");
  EXPECT_GT(stop.checks, 1000);
  EXPECT_LT(stop.checks, 100000);
  EXPECT_EQ(Run(expr, "stock"), "true,nil");
}

TEST_F(PatternTest, AStopInsideGsubEndsItAfterTheReplacementsMadeSoFar) {
  stop = FakeStop{0, 2};
  // Every 'b' is a quick match; the long run of 'a' before the last one is not.
  EXPECT_EQ(Run("(function() local n = 0 local ok, e = pcall(S.gsub, 'bbb' .. ('a'):rep(3000) .. 'b', 'a-a-a-b', "
                "function() n = n + 1 end) return n, e end)()",
                "ours"),
            "true,3,\"stopped after 2 checks\"");
}

// ---- the matcher alone -------------------------------------------------------

TEST(PatternMatcher, SearchReportsTheMatchAndItsCaptures) {
  const std::string_view s = "say hello";
  const std::string_view p = "(h)e()l+";
  PatternMatcher m(s.data(), s.size(), p.data(), p.size(), nullptr, nullptr);
  ASSERT_EQ(m.Search(0, false, nullptr), PatternMatcher::Status::kMatch);
  EXPECT_EQ(m.start() - s.data(), 4);
  EXPECT_EQ(m.end() - s.data(), 8);
  ASSERT_EQ(m.captures(), 2);
  EXPECT_EQ(m.capture(0).start - s.data(), 4);
  EXPECT_EQ(m.capture(0).len, 1);
  EXPECT_EQ(m.capture(1).start - s.data(), 6);
  EXPECT_EQ(m.capture(1).len, PatternMatcher::kPosition);
  EXPECT_EQ(m.Search(0, true, nullptr), PatternMatcher::Status::kNoMatch);
}

TEST(PatternMatcher, ErrorsAreReportedNotRaised) {
  const std::pair<std::string_view, PatternMatcher::Error> rows[] = {
      {"a%", PatternMatcher::Error::kEndsWithEscape},   {"[a", PatternMatcher::Error::kMissingBracket},
      {"%fa", PatternMatcher::Error::kFrontierBracket}, {"%b", PatternMatcher::Error::kBalanceArgs},
      {"%1", PatternMatcher::Error::kCaptureIndex},     {")", PatternMatcher::Error::kPatternCapture},
  };
  const std::string_view s = "abc";
  for (const auto& [p, error] : rows) {
    PatternMatcher m(s.data(), s.size(), p.data(), p.size(), nullptr, nullptr);
    EXPECT_EQ(m.Search(0, false, nullptr), PatternMatcher::Status::kError) << p;
    EXPECT_EQ(m.error(), error) << p;
  }
}

TEST(PatternMatcher, PlainSearchFindsTheFirstOccurrenceFromAnOffset) {
  const std::string_view hay("ab\0ab\0", 6);
  EXPECT_EQ(FindPlain(hay.data(), hay.size(), 0, "b\0", 2, nullptr, nullptr), 1);
  EXPECT_EQ(FindPlain(hay.data(), hay.size(), 2, "b\0", 2, nullptr, nullptr), 4);
  EXPECT_EQ(FindPlain(hay.data(), hay.size(), 5, "b\0", 2, nullptr, nullptr), -1);
  EXPECT_EQ(FindPlain(hay.data(), hay.size(), 6, "", 0, nullptr, nullptr), 6);
  EXPECT_EQ(FindPlain(hay.data(), hay.size(), 0, "abab", 4, nullptr, nullptr), -1);
  EXPECT_FALSE(HasPatternSpecials("a)b]", 4));
  EXPECT_TRUE(HasPatternSpecials("a\0-", 3));
}

// Searched in windows: an occurrence across a window's edge is found, and
// the stop is asked between windows, never within a short subject.
TEST(PatternMatcher, PlainSearchFindsWhatStraddlesItsWindowsAndStopsBetweenThem) {
  const std::string needle = "needle!";
  const size_t w = kFindWindow;
  const size_t n = needle.size();
  for (const size_t at : {w - n, w - n + 1, w - 1, w, w + 1, 2 * w - 3, 3 * w - n + 2}) {
    std::string hay(3 * w + 100, 'x');
    hay.replace(at, n, needle);
    for (const size_t from : {size_t{0}, w - 2, at}) {
      if (from > at) continue;
      EXPECT_EQ(FindPlain(hay.data(), hay.size(), from, needle.data(), n, nullptr, nullptr),
                static_cast<ptrdiff_t>(hay.find(needle, from)))
          << "at " << at << " from " << from;
    }
  }
  FakeStop stop{0, 2};
  const std::string long_hay(3 * w, 'x');
  EXPECT_EQ(FindPlain(long_hay.data(), long_hay.size(), 0, "y", 1, FakeStop::ShouldStop, &stop), kFindStopped);
  EXPECT_EQ(stop.checks, 2);
  stop = FakeStop{0, 1};
  const std::string short_hay(w, 'x');
  EXPECT_EQ(FindPlain(short_hay.data(), short_hay.size(), 0, "y", 1, FakeStop::ShouldStop, &stop), -1);
  EXPECT_EQ(stop.checks, 0);
}

// ---- wiring into a runtime ------------------------------------------------------

std::unique_ptr<LuaHost> MakeHost(const Clock* clock, int64_t slice_ns, int64_t timeout_ns, LibProfile::Kind kind) {
  LuaHostOptions o;
  o.libs.kind = kind;
  o.time_slice_ns = slice_ns;
  o.task_timeout_ns = timeout_ns;
  o.clock = clock;
  o.install_apis = RegisterPatternApi;  // as LuaRuntime does
  return CreateHost(o);
}

// Every runtime gets our pattern functions through RegisterPatternApi (they
// ask LuaHost::StopDue, the one stop check, which also stops Lua for reasons
// other than a taskTimeout; and they are no slower than Lua's own).
TEST(PatternWiring, EveryRuntimeGetsOurPatternFunctions) {
  TickingClock clock;
  const std::string count = "return debug.getinfo(string.find, 'u').nups + debug.getinfo(('').gsub, 'u').nups";
  EXPECT_EQ(RunLua(MakeHost(&clock, 0, 50'000'000, LibProfile::Kind::kAll).get(), count), "ok:2");
  EXPECT_EQ(RunLua(MakeHost(&clock, 5'000'000, 50'000'000, LibProfile::Kind::kAll).get(), count), "ok:2");
  EXPECT_EQ(RunLua(MakeHost(&clock, 5'000'000, 0, LibProfile::Kind::kAll).get(), count), "ok:2");
  EXPECT_EQ(RunLua(MakeHost(nullptr, 0, 0, LibProfile::Kind::kAll).get(), count), "ok:2");
  // In 'safe' too (no debug library there: compare with the method).
  EXPECT_EQ(RunLua(MakeHost(&clock, 0, 50'000'000, LibProfile::Kind::kSafe).get(),
                   "return string.find == ('').find and string.find('abc', 'b')"),
            "ok:2");
}

// The host installs no Lua API of its own: the pattern functions come from
// whoever assembles the runtime (LuaRuntime, through LuaHostOptions::install_apis).
TEST(PatternWiring, AHostWithoutInstalledApisKeepsLuasOwn) {
  LuaHostOptions o;
  o.libs.kind = LibProfile::Kind::kAll;
  EXPECT_EQ(RunLua(CreateHost(o).get(), "return debug.getinfo(string.find, 'u').nups"), "ok:0");
}

// The clock moves 1 ms a read: the matcher's checks run the budget out.
TEST(PatternWiring, ThePathologicalMatchIsKilledLikeALoopAndPcallCannotKeepIt) {
  TickingClock clock;
  auto host = MakeHost(&clock, 0, 50'000'000, LibProfile::Kind::kSafe);
  const char* const calls[] = {
      "string.find(s, p)",     "string.match(s, p)", "for _ in string.gmatch(s, p) do end",
      "string.gsub(s, p, '')", "s:find(p)",          "('x'):rep(1e5):match('.-.-.-.-.-y')",
  };
  for (const char* call : calls) {
    const std::string src = "local s, p = ('a'):rep(40000), ('a-'):rep(30) .. 'b' local ok = pcall(function() " +
                            std::string(call) + " end) return 'survived'";
    // The last raise is the hook's, at the chunk's next instruction after pcall.
    EXPECT_EQ(RunLua(host.get(), src), "err:CPU budget exceeded (taskTimeout 50 ms)") << call;
    EXPECT_TRUE(host->last_killed()) << call;
    EXPECT_EQ(RunLua(host.get(), "return ('abc'):find('b')"), "ok:2");  // usable afterwards
  }
}

TEST(PatternWiring, AKillInACoroutineMarksItLikeTheHooksKill) {
  TickingClock clock;
  auto host = MakeHost(&clock, 0, 50'000'000, LibProfile::Kind::kSafe);
  EXPECT_EQ(RunLua(host.get(),
                   "co = coroutine.create(function() return string.find(('a'):rep(40000), "
                   "('a-'):rep(30) .. 'b') end) return coroutine.resume(co)"),
            "ok:false");
  EXPECT_TRUE(host->last_killed());
  lua_State* L = host->main();
  lua_getglobal(L, "co");
  EXPECT_TRUE(LuaHost::HasKilledMark(lua_tothread(L, -1)));
  lua_pop(L, 1);
  EXPECT_FALSE(LuaHost::HasKilledMark(L));
}

}  // namespace
}  // namespace lua_tasks
