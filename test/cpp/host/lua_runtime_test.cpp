// SPDX-License-Identifier: MIT
// Tests for LuaRuntime: host, scheduler and tasks API assembled in order, or nothing.
#include "core/host/lua_runtime.hpp"

#include <string>

#include <gtest/gtest.h>

#include "core/api/lua_api_pattern.hpp"
#include "test_clocks.hpp"
#include "test_hosts.hpp"

namespace lua_tasks {
namespace {

class NoHooks final : public SchedulerHooks {
 public:
  void OnTaskEnd(Task&, lua_State*, const TaskEnding&) override {}
  void OnScheduleChange() override {}
  void OnCommit(Task&) override {}
};

TEST(LuaRuntimeTest, AssemblesAHostWhoseLuaHasTheTasksApiOfItsScheduler) {
  FakeClock clock;
  NoHooks hooks;
  LuaRuntime rt;
  std::string error;
  ASSERT_TRUE(rt.Assemble(LuaHostOptions{}, &clock, &hooks, &error)) << error;
  ASSERT_TRUE(rt.host && rt.scheduler);
  EXPECT_EQ(rt.scheduler->host(), rt.host.get());
  EXPECT_EQ(RunLua(rt.host.get(), "return type(tasks.start) .. ' ' .. type(require('tasks').state)"),
            "ok:function table");
  lua_State* L = rt.host->main();
  lua_getglobal(L, "tasks");
  lua_getfield(L, -1, "sleep");
  lua_remove(L, -2);
  EXPECT_NE(rt.scheduler->Start(L, 0, true), 0u);  // a task outside any task: tasks.sleep raises in it
  rt.Free();
  EXPECT_FALSE(rt.host);
  EXPECT_FALSE(rt.scheduler);
  rt.Free();  // idempotent
}

TEST(LuaRuntimeTest, AFailureToRegisterTheTasksApiLeavesNothingAndSaysWhy) {
  FakeClock clock;
  NoHooks hooks;
  // A memory limit a host alone (with the pattern functions a runtime's host
  // has) fits in, but not with the tasks API.
  size_t whole = 0;
  {
    LuaRuntime probe;
    std::string error;
    ASSERT_TRUE(probe.Assemble(LuaHostOptions{}, &clock, &hooks, &error)) << error;
    whole = probe.host->memory().peak;
  }
  LuaHostOptions o;
  o.install_apis = RegisterPatternApi;
  o.memory_limit = CreateHost(o)->memory().peak + 1024;
  ASSERT_LT(o.memory_limit, whole);
  ASSERT_TRUE(CreateHost(o));
  LuaRuntime rt;
  std::string error;
  EXPECT_FALSE(rt.Assemble(o, &clock, &hooks, &error));
  EXPECT_NE(error.find("memory"), std::string::npos) << error;
  EXPECT_FALSE(rt.host);
  EXPECT_FALSE(rt.scheduler);
}

// The runtime installs the pattern functions itself (LuaHost::StopDue stops
// them): its callers set no LuaHostOptions::install_apis.
TEST(LuaRuntimeTest, ItsStringLibraryHasThePatternFunctionsWithoutBeingAsked) {
  FakeClock clock;
  NoHooks hooks;
  LuaHostOptions o;
  o.libs.kind = LibProfile::Kind::kAll;
  LuaRuntime rt;
  std::string error;
  ASSERT_TRUE(rt.Assemble(o, &clock, &hooks, &error)) << error;
  EXPECT_EQ(RunLua(rt.host.get(), "return debug.getinfo(string.find, 'u').nups"), "ok:1");
}

}  // namespace
}  // namespace lua_tasks
