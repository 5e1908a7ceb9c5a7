// SPDX-License-Identifier: MIT
// Tests for value summaries: a Lua value as a short line, bounded, never a dump.
#include <string>

#include <gtest/gtest.h>
#include <lua.hpp>

#include "core/host/value_summary.hpp"

namespace lua_tasks {
namespace {

class ValueSummaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    L = luaL_newstate();
    luaL_openlibs(L);
  }
  void TearDown() override { lua_close(L); }
  // The summary of what `expr` evaluates to.
  std::string Of(const std::string& expr) {
    EXPECT_EQ(luaL_dostring(L, ("return " + expr).c_str()), LUA_OK) << lua_tostring(L, -1);
    std::string s = SummarizeValue(L, -1);
    lua_pop(L, 1);
    return s;
  }
  lua_State* L = nullptr;
};

TEST_F(ValueSummaryTest, ScalarsReadAsLuaPrintsThem) {
  const struct {
    const char* expr;
    const char* summary;
  } rows[] = {
      {"nil", "nil"},        {"true", "true"},      {"false", "false"},
      {"42", "42"},          {"-7", "-7"},          {"1.5", "1.5"},
      {"1e300", "1e+300"},   {"'hi'", "\"hi\""},    {"'a\"b'", "\"a\\\"b\""},
      {"'\\n'", "\"\\10\""}, {"print", "function"},
  };
  for (const auto& r : rows) EXPECT_EQ(Of(r.expr), r.summary) << r.expr;
}

TEST_F(ValueSummaryTest, ALongStringIsCutWithItsLength) {
  EXPECT_EQ(Of("string.rep('x', 5000)"), "\"" + std::string(120, 'x') + "...\" (5000 bytes)");
}

TEST_F(ValueSummaryTest, TablesShowTheirFirstEntriesOneLevelDeepAndTheirSize) {
  EXPECT_EQ(Of("{}"), "{}");
  EXPECT_EQ(Of("{1, 2}"), "{1, 2}");
  EXPECT_EQ(Of("{1, 2, 3, 4, 5}"), "{1, 2, 3, ...} (5 items)");
  EXPECT_EQ(Of("{gold = 5}"), "{gold = 5}");
  EXPECT_EQ(Of("{{1}}"), "{{...}}");
  const std::string big = Of("(function() local t = {} for i = 1, 100000 do t['k' .. i] = i end return t end)()");
  EXPECT_LT(big.size(), 200u) << big;
  EXPECT_NE(big.find("(at least 10000 keys)"), std::string::npos) << big;
}

TEST_F(ValueSummaryTest, AListOfValuesIsBoundedInAll) {
  ASSERT_TRUE(lua_checkstack(L, 110));  // Lua checks no push: a stack past its size overwrites the heap
  for (int i = 0; i < 100; ++i) lua_pushstring(L, std::string(100, 'v').c_str());
  const std::vector<std::string> s = SummarizeValues(L, 1, 100);
  ASSERT_LT(s.size(), 100u);
  EXPECT_EQ(s.back(), "... (" + std::to_string(100 - (s.size() - 1)) + " more)");
  EXPECT_EQ(lua_gettop(L), 100);  // nothing left on the stack, nothing taken
}

}  // namespace
}  // namespace lua_tasks
