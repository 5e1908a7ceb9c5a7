// SPDX-License-Identifier: MIT
// Tests for OffsetClock and the scheduler's wall-clock waits when its offset is set, with a fake clock.
#include "core/base/clock.hpp"

#include <string>

#include <gtest/gtest.h>

#include "core/host/lua_runtime.hpp"
#include "core/scheduling/scheduler.hpp"
#include "test_clocks.hpp"

namespace lua_tasks {
namespace {

constexpr int64_t kMs = 1'000'000;

class NoHooks final : public SchedulerHooks {
 public:
  void OnTaskEnd(Task&, lua_State*, const TaskEnding&) override {}
  void OnScheduleChange() override {}
  void OnCommit(Task&) override {}
};

TEST(OffsetClock, AddsItsOffsetToWallTimeOnly) {
  OffsetClock<FakeClock> c;
  const int64_t mono = c.base.mono;
  const int64_t wall = c.base.wall;
  c.set_offset_ns(-4000 * kMs);
  EXPECT_EQ(c.WallNs(), wall - 4000 * kMs);
  EXPECT_EQ(c.MonoNs(), mono);  // timers and elapsed times are not moved
  c.base.Advance(10 * kMs);
  EXPECT_EQ(c.WallNs(), wall + 10 * kMs - 4000 * kMs);
  EXPECT_EQ(c.offset_ns(), -4000 * kMs);
}

TEST(OffsetClock, TheSystemClockWithAnOffsetReadsAheadByIt) {
  OffsetClock<SystemClock> c;
  c.set_offset_ns(3'600'000 * kMs);
  const int64_t ahead = c.WallNs() - c.base.WallNs();
  EXPECT_GE(ahead, 3'600'000 * kMs - 1000 * kMs);  // two reads apart by far less than a second
  EXPECT_LE(ahead, 3'600'000 * kMs);
}

// A scheduler on an offset clock: UNTIL_TIME targets and os.time are on the
// offset clock; setting the offset forward wakes an armed wait by its
// deadline at once (not by the timer armed before), setting it back never
// wakes one early.
class OffsetSchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LuaHostOptions o;
    o.clock = &clock;  // os.time's, as the addon gives it
    std::string error;
    ASSERT_TRUE(rt.Assemble(o, &clock, &hooks, &error)) << error;
    host = rt.host.get();
    sched = rt.scheduler.get();
    Run(R"(log = {} function note(s) log[#log + 1] = s end
           function t(at) coroutine.yield("UNTIL_TIME", at, "MILLISECONDS") note("woke") end)");
  }
  void Run(const std::string& src) {
    lua_State* L = host->main();
    ASSERT_EQ(host->Load(L, src, "=test"), LUA_OK) << lua_tostring(L, -1);
    LuaHost::Entry e(host, L);
    ASSERT_EQ(host->PCall(L, 0, 0), LUA_OK) << host->last_message();
  }
  int Woken() {
    lua_State* L = host->main();
    lua_getglobal(L, "log");
    const int n = static_cast<int>(luaL_len(L, -1));
    lua_pop(L, 1);
    return n;
  }
  // A task waiting UNTIL_TIME `ms_from_now` on the offset clock.
  void StartUntil(int64_t ms_from_now) {
    lua_State* L = host->main();
    lua_getglobal(L, "t");
    lua_pushinteger(L, clock.WallNs() / kMs + ms_from_now);
    sched->Start(L, 1, true);
  }
  void SetOffset(int64_t ns) {
    const int64_t by = ns - clock.offset_ns();
    clock.set_offset_ns(ns);
    sched->WallClockMoved(by);
  }
  void Turn(int64_t ns) {
    clock.base.Advance(ns);
    sched->RunTimers();
    sched->RunImmediate();
  }

  OffsetClock<FakeClock> clock;
  NoHooks hooks;
  LuaRuntime rt;  // after what it points to: freed first
  LuaHost* host = nullptr;
  Scheduler* sched = nullptr;
};

TEST_F(OffsetSchedulerTest, OsTimeReadsTheOffsetClock) {
  SetOffset(-4000 * kMs);
  Run("now = os.time()");
  lua_State* L = host->main();
  lua_getglobal(L, "now");
  EXPECT_EQ(lua_tointeger(L, -1), clock.WallNs() / 1'000'000'000);
  EXPECT_EQ(lua_tointeger(L, -1), (clock.base.wall - 4000 * kMs) / 1'000'000'000);
  lua_pop(L, 1);
}

TEST_F(OffsetSchedulerTest, AnOffsetSetForwardWakesArmedWaitsByTheirDeadline) {
  StartUntil(10'000);
  Turn(1000 * kMs);
  SetOffset(4000 * kMs);  // 9 s left before; 5 s now
  Turn(4900 * kMs);
  EXPECT_EQ(Woken(), 0);
  Turn(100 * kMs);
  EXPECT_EQ(Woken(), 1);
}

TEST_F(OffsetSchedulerTest, AnOffsetSetBackNeverWakesAWaitEarly) {
  StartUntil(10'000);
  SetOffset(-4000 * kMs);  // 14 s left now
  Turn(13'900 * kMs);
  EXPECT_EQ(Woken(), 0);
  Turn(100 * kMs);
  EXPECT_EQ(Woken(), 1);
}

TEST_F(OffsetSchedulerTest, AnUnchangedOffsetLeavesWaitsAsTheyAre) {
  StartUntil(500);
  SetOffset(0);
  Turn(499 * kMs);
  EXPECT_EQ(Woken(), 0);
  Turn(1 * kMs);
  EXPECT_EQ(Woken(), 1);
}

}  // namespace
}  // namespace lua_tasks
