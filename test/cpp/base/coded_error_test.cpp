// SPDX-License-Identifier: MIT
// Tests for coded errors: Lua reads them as their message; the embedder reads their code.
#include "core/base/coded_error.hpp"

#include <cstring>
#include <memory>
#include <string>

#include <gtest/gtest.h>

namespace lua_tasks {
namespace {

struct StateCloser {
  void operator()(lua_State* L) const { lua_close(L); }
};

int l_bad(lua_State* L) {
  return RaiseCodedError(L, ErrorCode::kBadYield, "unknown yield instruction \"SOON\"");
}

class CodedErrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    L_.reset(luaL_newstate());
    luaL_openlibs(L());
    lua_pushcfunction(L(), [](lua_State* L) {
      RegisterCodedError(L);
      return 0;
    });
    ASSERT_EQ(lua_pcall(L(), 0, 0, 0), LUA_OK);
    lua_register(L(), "bad", l_bad);
  }
  lua_State* L() { return L_.get(); }

  // Runs `src`; returns its one string result or the error's text.
  std::string Run(const char* src) {
    if (luaL_loadbuffer(L(), src, std::strlen(src), "=t.lua") != LUA_OK || lua_pcall(L(), 0, 1, 0) != LUA_OK) {
      std::string e = luaL_tolstring(L(), -1, nullptr);
      lua_settop(L(), 0);
      return "error: " + e;
    }
    std::string out = lua_tostring(L(), -1) != nullptr ? lua_tostring(L(), -1) : "(not a string)";
    lua_settop(L(), 0);
    return out;
  }

 private:
  std::unique_ptr<lua_State, StateCloser> L_;
};

TEST_F(CodedErrorTest, ReadsInLuaAsTheMessageWithTheCallersPosition) {
  EXPECT_EQ(Run("local ok, e = pcall(function()\n bad()\n end) return tostring(e)"),
            "t.lua:2: unknown yield instruction \"SOON\"");
  EXPECT_EQ(Run("local ok, e = pcall(function() bad() end) return e.message"),
            "t.lua:1: unknown yield instruction \"SOON\"");
  EXPECT_EQ(Run("local ok, e = pcall(function() bad() end) return e.code"), "ERR_BAD_YIELD");
  EXPECT_EQ(Run("local ok, e = pcall(function() bad() end) return '<' .. e .. '>'"),
            "<t.lua:1: unknown yield instruction \"SOON\">");
  EXPECT_EQ(Run("local ok, e = pcall(function() bad() end) return type(e) .. tostring(e.other)"), "userdatanil");
  EXPECT_EQ(Run("local ok, e = pcall(function() bad() end) return tostring(getmetatable(e))"), "false");
  EXPECT_EQ(Run("local ok, e = pcall(function() bad() end) return e .. {}"),
            "error: t.lua:1: attempt to concatenate a table value");
}

TEST_F(CodedErrorTest, TheEmbedderReadsItsCodeAndMessage) {
  ASSERT_EQ(luaL_loadstring(L(), "bad()"), LUA_OK);
  ASSERT_EQ(lua_pcall(L(), 0, 0, 0), LUA_ERRRUN);
  ErrorCode code = ErrorCode::kCommitFailed;
  ASSERT_TRUE(IsCodedError(L(), -1, &code));
  EXPECT_EQ(code, ErrorCode::kBadYield);
  EXPECT_STREQ(ErrorCodeName(code), "ERR_BAD_YIELD");
  EXPECT_EQ(CodedErrorMessage(L(), -1), "[string \"bad()\"]:1: unknown yield instruction \"SOON\"");
  EXPECT_EQ(lua_gettop(L()), 1);  // both leave the stack as it was
}

TEST_F(CodedErrorTest, OtherValuesAreNotCodedErrors) {
  ErrorCode code;
  lua_pushliteral(L(), "unknown yield instruction");
  EXPECT_FALSE(IsCodedError(L(), -1, &code));
  lua_newuserdatauv(L(), 8, 1);
  EXPECT_FALSE(IsCodedError(L(), -1, &code));
  lua_newtable(L());
  EXPECT_FALSE(IsCodedError(L(), -1, &code));
  EXPECT_EQ(lua_gettop(L()), 3);
}

}  // namespace
}  // namespace lua_tasks
