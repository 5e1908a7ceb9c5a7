// SPDX-License-Identifier: MIT
#include "core/api/lua_list.hpp"

#include <gtest/gtest.h>

namespace lua_tasks {
namespace {

struct State {
  State() : L(luaL_newstate()) {}
  ~State() { lua_close(L); }
  lua_State* L;
};

TEST(LuaListTest, AMarkedTableIsAListAndAnOtherTableIsNot) {
  State s;
  lua_newtable(s.L);
  MarkList(s.L, -1);
  lua_newtable(s.L);
  EXPECT_TRUE(IsMarkedList(s.L, -2));
  EXPECT_FALSE(IsMarkedList(s.L, -1));
  // Another metatable is not the mark.
  lua_newtable(s.L);
  lua_setmetatable(s.L, -2);
  EXPECT_FALSE(IsMarkedList(s.L, -1));
  EXPECT_EQ(lua_gettop(s.L), 2);
}

TEST(LuaListTest, EveryListSharesOneMark) {
  State s;
  lua_newtable(s.L);
  MarkList(s.L, -1);
  lua_newtable(s.L);
  MarkList(s.L, -1);
  ASSERT_TRUE(lua_getmetatable(s.L, -1));
  ASSERT_TRUE(lua_getmetatable(s.L, -3));
  EXPECT_TRUE(lua_rawequal(s.L, -1, -2));
}

}  // namespace
}  // namespace lua_tasks
