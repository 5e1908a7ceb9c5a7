// SPDX-License-Identifier: MIT
// Tests for how long Scheduler's batches hold the loop: settled promises' chains, the CPU slice and budget.
#include "core/scheduling/scheduler.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "scheduling/scheduler_fixture.hpp"

namespace lua_tasks {
namespace {

using namespace scheduler_testing;  // the fixture (scheduler_fixture.hpp)

// Waits as an await of a JS promise does (lua_api: BeginAwait); the test
// settles it with Settled, as the addon's settle callback would.
int AwaitForTest(lua_State* L) {
  auto* s = static_cast<Scheduler*>(lua_touserdata(L, lua_upvalueindex(1)));
  s->current()->Pend(WaitKind::kPromise);
  return lua_yield(L, 0);
}

class DeliverTest : public SchedulerTest {
 protected:
  void SetUp() override {
    SchedulerTest::SetUp();
    lua_State* L = host->main();
    lua_pushlightuserdata(L, sched);
    lua_pushcclosure(L, AwaitForTest, 1);
    lua_setglobal(L, "await");
  }
  // The promise `key` awaits resolved to `v`.
  void Settled(uint64_t key, const char* v) {
    Task* t = sched->Find(key);
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->wait, WaitKind::kPromise);
    lua_pushboolean(t->co, 1);
    lua_pushstring(t->co, v);
    sched->Deliver(t, 2);
  }
};

// A task awaiting settled promises in a loop must not run as one chain of
// microtasks that keeps the loop from turning while it lasts.
TEST_F(DeliverTest, ASettledPromiseRunsItsTaskAtOnceUntilTheTurnsChainIsOld) {
  Run(R"(function waiter() for i = 1, 5 do local ok, v = await() note(v) end end)");
  const uint64_t k = Start("waiter");
  Settled(k, "1");  // the turn's chain begins
  clock.Advance(Scheduler::kDirectChainNs);
  Settled(k, "2");          // its run parks kDirectChainNs after the chain began
  EXPECT_EQ(Log(), "1,2");  // direct: an await costs no loop turn
  Settled(k, "3");
  EXPECT_EQ(Log(), "1,2");  // the chain is old: through the ready queue
  EXPECT_TRUE(sched->HasReady());
  lua_State* L = host->main();
  const int base = lua_gettop(L);
  lua_pushliteral(L, "x");
  EXPECT_EQ(sched->Resume(k, L, 1), Scheduler::ResumeResult::kNotResumable);  // queued, not waiting on a yield
  EXPECT_EQ(lua_gettop(L), base);
  Turn(0);
  EXPECT_EQ(Log(), "1,2,3");
  Settled(k, "4");  // still the same loop turn
  EXPECT_EQ(Log(), "1,2,3");
  Turn(0);
  EXPECT_EQ(Log(), "1,2,3,4");
  sched->LoopTurned();  // the loop polled: a new chain
  Settled(k, "5");
  EXPECT_EQ(Log(), "1,2,3,4,5");
  EXPECT_EQ(sched->task_count(), 0u);
}

TEST_F(DeliverTest, ASettlementWhileTheLockIsHeldRunsAtTheUnlock) {
  Run(R"(function waiter() local ok, v = await() note(v) end)");
  const uint64_t k = Start("waiter");
  sched->Lock();  // the embedder's, while it takes a snapshot
  Settled(k, "v");
  EXPECT_EQ(Log(), "");
  sched->Unlock();
  EXPECT_EQ(Log(), "v");
}

TEST_F(DeliverTest, ATaskQueuedWithItsPromisesValueCanBeCancelled) {
  Run(R"(function waiter() for i = 1, 3 do local ok, v = await() note(v) end end)");
  const uint64_t first = Start("waiter");
  const uint64_t second = Start("waiter");
  Settled(first, "a");  // the turn's chain begins
  clock.Advance(Scheduler::kDirectChainNs);
  Settled(first, "b");  // runs, parks: the chain's direct part is over
  Settled(second, "c");
  EXPECT_EQ(Log(), "a,b");
  ASSERT_TRUE(sched->HasReady());
  EXPECT_TRUE(sched->Cancel(second));
  Turn(0);
  EXPECT_EQ(Log(), "a,b");
  EXPECT_EQ(rec.ends, std::vector<std::string>{"cancelled"});
  EXPECT_EQ(sched->task_count(), 1u);  // first, awaiting
}

// A runtime with a CPU budget on a clock that moves 1 ms every time it is
// read: Lua code "runs" for as long as it reads the clock, so preemption and
// kills are deterministic.
class CpuBudgetTest : public ::testing::Test {
 protected:
  void Make(int64_t slice_ns, int64_t timeout_ns) {
    LuaHostOptions o;
    o.time_slice_ns = slice_ns;
    o.task_timeout_ns = timeout_ns;
    o.clock = &clock;
    std::string error;
    ASSERT_TRUE(rt.Assemble(o, &clock, &rec, &error)) << error;
    host = rt.host.get();
    sched = rt.scheduler.get();
  }

  TickingClock clock;
  Recorder rec;
  LuaRuntime rt;  // after what it points to: freed first
  LuaHost* host = nullptr;
  Scheduler* sched = nullptr;
};

TEST_F(CpuBudgetTest, PreemptsAtTheSliceAndKillsPastTheBudgetThroughPcall) {
  ASSERT_NO_FATAL_FAILURE(Make(5'000'000, 200'000'000));
  lua_State* L = host->main();
  ASSERT_EQ(luaL_dostring(L, R"(function spin() while true do pcall(function() while true do end end) end end)"),
            LUA_OK);
  lua_getglobal(L, "spin");
  sched->Start(L, 0, true);
  EXPECT_GT(host->budget()->preemptions(), 0u);  // made to yield at its first slice
  for (int i = 0; i < 100 && sched->task_count() > 0; ++i) sched->RunImmediate();
  EXPECT_EQ(sched->task_count(), 0u);
  EXPECT_EQ(rec.ends, std::vector<std::string>{"failed:timeout"});
}

// A kill swallowed by coroutine.resume reaches the caller's next
// instruction: code after it cannot run on, nor start a task
// that would outlive the kill (it could, for up to 1,000 instructions).
TEST_F(CpuBudgetTest, CodeAfterAKilledCoroutineStopsAtItsNextInstruction) {
  ASSERT_NO_FATAL_FAILURE(Make(0, 200'000'000));
  lua_State* L = host->main();
  ASSERT_EQ(luaL_dostring(L, R"(
    log = ""
    function child() log = log .. "ran " coroutine.yield() log = log .. "resumed" end
    function parent()
      local ok = coroutine.resume(coroutine.create(function() while true do end end))
      log = log .. tostring(ok) .. " "
      tasks.start(child)
      while true do end
    end)"),
            LUA_OK);
  lua_getglobal(L, "parent");
  sched->Start(L, 0, true);
  sched->RunImmediate();
  lua_getglobal(L, "log");
  EXPECT_STREQ(lua_tostring(L, -1), "");
  lua_pop(L, 1);
  EXPECT_EQ(rec.ends, std::vector<std::string>{"failed:timeout"});
  EXPECT_EQ(sched->task_count(), 0u);
}

TEST_F(CpuBudgetTest, ABatchEndsOnceItHasHeldTheLoopForASlice) {
  // Four spinning tasks, each preempted after its own 5 ms: one batch runs
  // about one slice's worth of them, not all four back to back (20 ms).
  ASSERT_NO_FATAL_FAILURE(Make(5'000'000, 0));
  lua_State* L = host->main();
  ASSERT_EQ(luaL_dostring(L, R"(turns = 0 function spin() coroutine.yield() while true do turns = turns + 1
                                  for i = 1, 1e9 do end end end)"),
            LUA_OK);
  for (int i = 0; i < 4; ++i) {
    lua_getglobal(L, "spin");
    sched->Start(L, 0, true);  // each yields IMMEDIATE at once
  }
  auto turns = [&] {
    lua_getglobal(L, "turns");
    const lua_Integer n = lua_tointeger(L, -1);
    lua_pop(L, 1);
    return n;
  };
  sched->RunImmediate();
  EXPECT_EQ(turns(), 1);  // the first ran its slice; the other three wait, in order
  sched->RunImmediate();
  EXPECT_EQ(turns(), 2);
  for (int i = 0; i < 10; ++i) sched->RunImmediate();
  EXPECT_EQ(turns(), 4);  // every spinner got its turns: nobody starved
  sched->CancelAll();
}

}  // namespace
}  // namespace lua_tasks
