// SPDX-License-Identifier: MIT
// Tests for the tasks.state accessor: found raw in package.loaded, nil or a no-op without a tasks module.
#include "core/store/tasks_state.hpp"

#include <string>

#include <gtest/gtest.h>

namespace lua_tasks {
namespace {

class TasksStateTest : public ::testing::Test {
 protected:
  void SetUp() override { L = luaL_newstate(); }
  void TearDown() override { lua_close(L); }
  // package.loaded.tasks = { state = <state> }, with a metatable whose
  // __index/__newindex would raise: the accessor must not run them.
  void MakeTasks(const char* state) {
    const std::string src = std::string(R"(
      local trap = setmetatable({}, { __index = function() error("ran __index") end,
                                      __newindex = function() error("ran __newindex") end })
      local loaded = debug.getregistry()._LOADED
      loaded.tasks = setmetatable({ state = )") +
                            state + " }, getmetatable(trap))";
    luaL_openlibs(L);
    ASSERT_EQ(luaL_dostring(L, src.c_str()), LUA_OK) << lua_tostring(L, -1);
  }
  lua_State* L = nullptr;
};

TEST_F(TasksStateTest, ReadsTheStateOfTheTasksModule) {
  MakeTasks("'saved'");
  PushTasksState(L);
  EXPECT_STREQ(lua_tostring(L, -1), "saved");
  lua_pop(L, 1);
  EXPECT_EQ(lua_gettop(L), 0);
}

TEST_F(TasksStateTest, SetsTheStateOfTheTasksModuleFromAnyIndex) {
  MakeTasks("nil");
  lua_pushinteger(L, 42);
  lua_pushliteral(L, "above");
  SetTasksState(L, -2);
  EXPECT_EQ(lua_gettop(L), 2);
  lua_settop(L, 0);
  PushTasksState(L);
  EXPECT_EQ(lua_tointeger(L, -1), 42);
}

TEST_F(TasksStateTest, WithoutATasksModuleTheStateIsNilAndASetDoesNothing) {
  luaL_openlibs(L);
  PushTasksState(L);
  EXPECT_TRUE(lua_isnil(L, -1));
  SetTasksState(L, -1);
  EXPECT_EQ(lua_gettop(L), 1);
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "loaded");
  lua_getfield(L, -1, "tasks");
  EXPECT_TRUE(lua_isnil(L, -1));
}

}  // namespace
}  // namespace lua_tasks
