// SPDX-License-Identifier: MIT
// Tests for CpuBudget with fake clocks: its windows alone, and deadline inheritance, hooks and close in a runtime.
#include "core/limits/cpu_budget.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/host/lua_runtime.hpp"
#include "test_clocks.hpp"
#include "test_hosts.hpp"

namespace lua_tasks {
namespace {

constexpr int64_t kMs = 1'000'000;

class Recorder final : public SchedulerHooks {
 public:
  void OnTaskEnd(Task&, lua_State* co, const TaskEnding& end) override {
    if (end.kind == TaskEnd::kDone) {
      ends.push_back("done");
    } else if (end.kind == TaskEnd::kCancelled) {
      ends.push_back("cancelled");
    } else if (end.kind == TaskEnd::kTimedOut || LuaHost::HasKilledMark(co)) {
      ends.push_back("timeout");
    } else {
      ends.push_back(std::string("failed:") + lua_tostring(co, -1));
    }
  }
  void OnScheduleChange() override {}
  void OnCommit(Task&) override {}
  std::vector<std::string> ends;
};

// burn(ms): a C call that takes `ms` of the fake clock's time without
// reading it, as a long C function does; charge(ms) does the same and then
// charges its thread, as the bounded library functions do.
FakeClock* ClockOf(lua_State* L) {
  return static_cast<FakeClock*>(lua_touserdata(L, lua_upvalueindex(1)));
}
int l_burn(lua_State* L) {
  ClockOf(L)->Advance(static_cast<int64_t>(luaL_checknumber(L, 1) * kMs));
  return 0;
}
int l_charge(lua_State* L) {
  ClockOf(L)->Advance(static_cast<int64_t>(luaL_checknumber(L, 1) * kMs));
  LuaHost::From(L)->Charge(L);
  return 0;
}

template <typename ClockT>
class BudgetTest : public ::testing::Test {
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
    lua_State* L = host->main();
    lua_pushlightuserdata(L, &clock);
    lua_pushcclosure(L, l_burn, 1);
    lua_setglobal(L, "burn");
    lua_pushlightuserdata(L, &clock);
    lua_pushcclosure(L, l_charge, 1);
    lua_setglobal(L, "charge");
  }
  void Define(const char* src) {
    lua_State* L = host->main();
    ASSERT_EQ(luaL_dostring(L, src), LUA_OK) << lua_tostring(L, -1);
  }
  // Starts the global function `name` as an observed task, as rt.start does.
  uint64_t Start(const char* name) {
    lua_State* L = host->main();
    lua_getglobal(L, name);
    return sched->Start(L, 0, true);
  }
  lua_Integer Global(const char* name) {
    lua_State* L = host->main();
    lua_getglobal(L, name);
    const lua_Integer v = lua_tointeger(L, -1);
    lua_pop(L, 1);
    return v;
  }
  ClockT clock;
  Recorder rec;
  LuaRuntime rt;  // after what it points to: freed first
  LuaHost* host = nullptr;
  Scheduler* sched = nullptr;
};

// Each reading is 10 us after the last: work that reads the clock once an
// item takes time by the item.
class SlowReadClock final : public Clock {
 public:
  int64_t MonoNs() const override { return mono += 10'000; }
  int64_t WallNs() const override { return int64_t{1'700'000'000} * 1'000'000'000 + (mono += 10'000); }
  mutable int64_t mono = 0;
};

using FakeBudgetTest = BudgetTest<FakeClock>;
using TickingBudgetTest = BudgetTest<TickingClock>;
using SlowReadBudgetTest = BudgetTest<SlowReadClock>;

// ---------------------------------------------------------------- deadline inheritance

TEST_F(FakeBudgetTest, ATaskStartedUnderADeadlineInheritsIt) {
  ASSERT_NO_FATAL_FAILURE(Make(0, 100 * kMs));
  Define(R"(
    log = ""
    function child() for i = 1, 3 do charge(30) log = log .. "c" .. i end end
    function parent() charge(50) tasks.start(child) log = log .. "p" end)");
  const int64_t t0 = clock.mono;
  Start("parent");
  // The child started at 50 ms: on its own budget it would run to 150 ms,
  // but it runs under its starter's deadline (100 ms), and so does the
  // starter once the child is killed: neither goes on past it.
  lua_State* L = host->main();
  lua_getglobal(L, "log");
  EXPECT_STREQ(lua_tostring(L, -1), "c1");
  lua_pop(L, 1);
  EXPECT_EQ(rec.ends, (std::vector<std::string>{"timeout", "timeout"}));
  EXPECT_LE(clock.mono - t0, 110 * kMs);
  EXPECT_EQ(sched->task_count(), 0u);
}

TEST_F(FakeBudgetTest, ATaskStartedAfterTheDeadlinePassedDiesAtItsFirstInstruction) {
  ASSERT_NO_FATAL_FAILURE(Make(0, 100 * kMs));
  // The C call takes the starter past its deadline without an instruction
  // in between: the task it then starts inherits a deadline already passed.
  Define(R"(
    ran = 0
    function child() ran = ran + 1 end
    function parent() burn(150) local ok = pcall(tasks.start, child) ran = ran + 10 end)");
  Start("parent");
  EXPECT_EQ(Global("ran"), 0);
  EXPECT_EQ(rec.ends, (std::vector<std::string>{"timeout", "timeout"}));
}

TEST_F(FakeBudgetTest, AWaiterOfATaskKilledByItsResumersDeadlineRunsLaterUnderItsOwnBudget) {
  // util.async's warden waits for the task running a runner's item, to tell
  // the runner when that task dies. Woken at once by a kill that went on
  // outside the task (the resumer's deadline), it died of it before it could.
  ASSERT_NO_FATAL_FAILURE(Make(0, 100 * kMs));
  Define(R"(
    woke = 0
    function child() coroutine.yield("INDEFINITELY") charge(100) end
    function waiter(id) local ok, err = pcall(tasks.wait, id) charge(50) woke = woke + 1 why = err end
    function parent()
      charge(50)
      local id = tasks.start(child)
      tasks.start(waiter, id)
      tasks.resume(id)
    end)");
  Start("parent");
  EXPECT_EQ(Global("woke"), 0);  // not inside the killed window
  EXPECT_EQ(rec.ends, (std::vector<std::string>{"timeout", "timeout"}));
  sched->RunImmediate();
  EXPECT_EQ(Global("woke"), 1);  // and lived through a charge of half its own budget
  lua_State* L = host->main();
  lua_getglobal(L, "why");
  EXPECT_STREQ(lua_tostring(L, -1), "task killed: CPU budget exceeded");
  lua_pop(L, 1);
  EXPECT_EQ(rec.ends.size(), 2u);
}

TEST_F(FakeBudgetTest, ATaskResumedFromATaskKeepsItsOwnBudgetWhenThatEndsFirst) {
  ASSERT_NO_FATAL_FAILURE(Make(0, 100 * kMs));
  Define(R"(
    log = ""
    function sleeper() charge(90) coroutine.yield("INDEFINITELY") for i = 1, 5 do charge(5) log = log .. i end end
    function waker(id) local ok = tasks.resume(id) log = log .. "|waker" end)");
  lua_State* L = host->main();
  const uint64_t id = Start("sleeper");  // used 90 of its 100 ms
  lua_getglobal(L, "waker");
  lua_pushstring(L, sched->IdOf(id).c_str());
  sched->Start(L, 1, true);
  // The sleeper is killed when its own budget runs out (at its second
  // charge), inside the waker's window; the waker, within its own, goes on.
  lua_getglobal(L, "log");
  EXPECT_STREQ(lua_tostring(L, -1), "1|waker");
  lua_pop(L, 1);
  EXPECT_EQ(rec.ends, (std::vector<std::string>{"timeout", "done"}));
}

TEST_F(TickingBudgetTest, AForkBombEndsWithinItsStartersBudget) {
  ASSERT_NO_FATAL_FAILURE(Make(0, 200 * kMs));
  Define(R"(
    n = 0
    function bomb() n = n + 1 pcall(tasks.start, bomb) pcall(tasks.start, bomb) while true do end end)");
  const int64_t t0 = clock.mono;
  Start("bomb");  // used to grow a tree inside this one call, for ever
  EXPECT_EQ(sched->task_count(), 0u);
  EXPECT_LT(Global("n"), 1000);
  EXPECT_LT(clock.mono - t0, 2000 * kMs);  // each clock read is 1 ms here
  EXPECT_FALSE(rec.ends.empty());
  for (const std::string& e : rec.ends) EXPECT_TRUE(e == "timeout" || e.rfind("failed:", 0) == 0) << e;
}

TEST_F(TickingBudgetTest, AForkBombOfTasksThatYieldAtOnceEndsToo) {
  // Each task starts two more before it yields: no task ever runs the
  // 1,000 instructions of a hook, but each start opens a window, which reads
  // the clock.
  ASSERT_NO_FATAL_FAILURE(Make(0, 200 * kMs));
  Define(R"(
    n = 0
    function bomb() n = n + 1 pcall(tasks.start, bomb) pcall(tasks.start, bomb) coroutine.yield() end)");
  Start("bomb");
  EXPECT_LT(Global("n"), 1000);
  sched->CancelAll();
}

TEST_F(TickingBudgetTest, ATreeOfCoroutinesEachRunningAFewInstructionsStops) {
  // Lua gives every new coroutine a fresh hook count; coroutine.resume reads
  // the clock every 64 resumes.
  ASSERT_NO_FATAL_FAILURE(Make(0, 100 * kMs));
  Define("function tree() pcall(coroutine.wrap(tree)) pcall(coroutine.wrap(tree)) end");
  const std::string out = RunLua(host, "tree() return 'survived'");
  EXPECT_NE(out.find("CPU budget exceeded (taskTimeout 100 ms)"), std::string::npos) << out;
  EXPECT_EQ(RunLua(host, "return 1 + 1"), "ok:2");
}

TEST_F(FakeBudgetTest, TheWaitersOfATaskShareOneSliceWhenItEnds) {
  // A task's end wakes its waiters back to back; each had a slice of its
  // own (100 waiters, 500 ms at timeSlice 5). Now they share one: past it,
  // each is preempted at its first clock read (1 ms of this fake clock).
  ASSERT_NO_FATAL_FAILURE(Make(5 * kMs, 0));
  Define(R"(
    woke = 0
    function target() coroutine.yield("INDEFINITELY") end
    function waiter(id) pcall(tasks.wait, id) woke = woke + 1 while true do charge(1) end end)");
  lua_State* L = host->main();
  const uint64_t id = Start("target");
  for (int i = 0; i < 100; ++i) {
    lua_getglobal(L, "waiter");
    lua_pushstring(L, sched->IdOf(id).c_str());
    sched->Start(L, 1, false);
  }
  const int64_t t0 = clock.mono;
  sched->Cancel(id);  // its end wakes the 100 waiters
  EXPECT_EQ(Global("woke"), 100);
  EXPECT_LT(clock.mono - t0, 200 * kMs);
  sched->CancelAll();
}

TEST_F(TickingBudgetTest, StartsHeldBackByTheCommitLockRunASliceAtATime) {
  // Twenty spinners started while a COMMIT holds the lock used to run back
  // to back when it was released, each for its own slice.
  ASSERT_NO_FATAL_FAILURE(Make(5 * kMs, 0));
  Define(R"(
    ran = 0
    function spin() ran = ran + 1 while true do end end)");
  sched->Lock();
  for (int i = 0; i < 20; ++i) Start("spin");  // as rt.start during a COMMIT
  EXPECT_EQ(Global("ran"), 0);
  sched->Unlock();
  EXPECT_GE(Global("ran"), 1);
  EXPECT_LT(Global("ran"), 20);  // the rest were filed as ready, in order
  for (int i = 0; i < 40 && Global("ran") < 20; ++i) sched->RunImmediate();
  EXPECT_EQ(Global("ran"), 20);
  sched->CancelAll();
}

TEST_F(SlowReadBudgetTest, ABacklogOfDueTimersRunsASliceOfWakesAtATimeNotOne) {
  // 10,000 waits due at once on the wall clock (taking each reads it): the
  // timer batch took them all before it ran one, so the taking alone used
  // the slice up, the rest were armed again, and each batch woke one task
  // (W14 wakes with a timeSlice: 100,000 durable sleepers woke ~30 a second).
  ASSERT_NO_FATAL_FAILURE(Make(5 * kMs, 0));
  Define(R"(
    woke = 0
    function sleeper(at) coroutine.yield("UNTIL_TIME", at) woke = woke + 1 end)");
  lua_State* L = host->main();
  const double at = static_cast<double>(clock.WallNs() + 10000 * kMs) / 1e9;  // past the starts
  for (int i = 0; i < 10000; ++i) {
    lua_getglobal(L, "sleeper");
    lua_pushnumber(L, at);
    sched->Start(L, 1, false);
  }
  // Those past the starts' slice were filed as ready: on to their waits.
  for (int i = 0; i < 10000 && sched->HasReady(); ++i) sched->RunImmediate();
  ASSERT_FALSE(sched->HasReady());
  ASSERT_EQ(Global("woke"), 0);
  clock.mono += 20000 * kMs;  // every one is due
  sched->RunTimers();
  EXPECT_GE(Global("woke"), 50);
  int batches = 1;
  for (; Global("woke") < 10000 && batches < 1000; ++batches) sched->RunTimers();
  EXPECT_EQ(Global("woke"), 10000);
  EXPECT_LT(batches, 500);
  sched->CancelAll();
}

TEST_F(TickingBudgetTest, ATaskStartedFromATaskIsPreemptedWithATimeSliceAlone) {
  // Nested windows were never preemptible: with a timeSlice and no
  // taskTimeout, tasks.start(spin) from a task never returned.
  ASSERT_NO_FATAL_FAILURE(Make(5 * kMs, 0));
  Define(R"(
    log = ""
    function spin() while true do end end
    function starter() tasks.start(spin) log = log .. "back" end)");
  Start("starter");
  lua_State* L = host->main();
  lua_getglobal(L, "log");
  EXPECT_STREQ(lua_tostring(L, -1), "back");
  lua_pop(L, 1);
  EXPECT_GT(host->budget()->preemptions(), 0u);
  sched->CancelAll();
}

TEST_F(TickingBudgetTest, CodeAfterAKilledCoroutineCannotRunOn) {
  ASSERT_NO_FATAL_FAILURE(Make(0, 100 * kMs));
  Define("after = 0");
  const std::string out = RunLua(host, R"(
    local ok = coroutine.resume(coroutine.create(function() while true do end end))
    after = after + 1
    return "survived")");
  EXPECT_NE(out.find("CPU budget exceeded (taskTimeout 100 ms)"), std::string::npos) << out;
  EXPECT_EQ(Global("after"), 0);
}

// ---------------------------------------------------------------- expensive instructions

TEST_F(FakeBudgetTest, AChargedCallRunsTheHookAtTheNextInstruction) {
  // Each charge(5) is one slow call: without the charge the first hook came
  // after about 330 of them (1.6 s for a 100 ms budget).
  ASSERT_NO_FATAL_FAILURE(Make(0, 100 * kMs));
  const int64_t t0 = clock.mono;
  EXPECT_EQ(RunLua(host, "while true do charge(5) end"), "err:CPU budget exceeded (taskTimeout 100 ms)");
  EXPECT_LE(clock.mono - t0, 105 * kMs);
}

TEST_F(FakeBudgetTest, SlowInstructionsShrinkTheHookCount) {
  // burn(1) is charged to nobody: only the hook's own measure can see it.
  // The first interval runs the full count (about 330 ms here); from then on
  // the count fits the time instructions take, so the kill lands soon after
  // the deadline rather than up to a whole interval late.
  ASSERT_NO_FATAL_FAILURE(Make(0, 1000 * kMs));
  const int64_t t0 = clock.mono;
  EXPECT_EQ(RunLua(host, "while true do burn(1) end"), "err:CPU budget exceeded (taskTimeout 1000 ms)");
  const int64_t took = clock.mono - t0;
  EXPECT_GE(took, 1000 * kMs);
  EXPECT_LE(took, 1100 * kMs);  // a fixed count of 1,000 killed at 1,332 ms
  EXPECT_LT(host->budget()->hook_every(), CpuBudget::kHookEvery);
}

TEST_F(FakeBudgetTest, CheapInstructionsKeepTheFullCount) {
  ASSERT_NO_FATAL_FAILURE(Make(5 * kMs, 1000 * kMs));
  EXPECT_EQ(RunLua(host, "local s = 0 for i = 1, 1e5 do s = s + i end return s"), "ok:5000050000");
  EXPECT_EQ(host->budget()->hook_every(), CpuBudget::kHookEvery);
  EXPECT_EQ(lua_gethookcount(host->main()), CpuBudget::kHookEvery);
}

TEST_F(FakeBudgetTest, BigStringsCapTheCountWhileTheyLive) {
  ASSERT_NO_FATAL_FAILURE(Make(0, 200 * kMs));
  EXPECT_EQ(host->budget()->Cap(), CpuBudget::kHookEvery);
  EXPECT_EQ(RunLua(host, "BIG = string.rep('x', 16 << 20) return #BIG"), "ok:16777216");
  // An instruction on two such strings (a compare) may take about 1.6 ms:
  // no more instructions between two clock reads than fit an eighth of the
  // budget (25 ms).
  EXPECT_GE(host->memory().big_strings, size_t{16} << 20);
  EXPECT_LE(host->budget()->Cap(), 16);
  EXPECT_GE(host->budget()->Cap(), 1);
  EXPECT_EQ(RunLua(host, "for i = 1, 100 do end return 1"), "ok:1");
  EXPECT_LE(lua_gethookcount(host->main()), host->budget()->Cap());
  EXPECT_EQ(RunLua(host, "BIG = nil collectgarbage() collectgarbage() return 1"), "ok:1");
  EXPECT_EQ(host->memory().big_strings, 0u);
  EXPECT_EQ(host->budget()->Cap(), CpuBudget::kHookEvery);
}

TEST_F(FakeBudgetTest, BigStringsHandedInFromTheHostCapATasksFirstStretch) {
  // A string pushed by host code (a value from JS) is allocated outside any
  // window, where nothing charges: the cap holds from the task's first
  // instruction anyway (it ran a full 1,000 instructions of 16 MB compares
  // first: 3x taskTimeout).
  ASSERT_NO_FATAL_FAILURE(Make(0, 100 * kMs));
  lua_State* L = host->main();
  std::string big(16 << 20, 'x');
  lua_pushlstring(L, big.data(), big.size());
  lua_setglobal(L, "A");
  Define("function keep() CO = coroutine.running() coroutine.yield('INDEFINITELY') end");
  Start("keep");
  lua_getglobal(L, "CO");
  EXPECT_LE(lua_gethookcount(lua_tothread(L, -1)), host->budget()->Cap());
  EXPECT_LT(host->budget()->Cap(), CpuBudget::kHookEvery);
  lua_pop(L, 1);
  sched->CancelAll();
}

TEST_F(FakeBudgetTest, ALargeAllocationChargesTheRunningCoroutine) {
  ASSERT_NO_FATAL_FAILURE(Make(0, 100 * kMs));
  // The allocation charges the coroutine that made it, not the thread that
  // entered from C++.
  Define(R"(
    function grow() local s = string.rep("y", 1 << 20) coroutine.yield() end
    co = coroutine.create(grow))");
  EXPECT_EQ(RunLua(host, "assert(coroutine.resume(co)) return 1"), "ok:1");
  lua_State* L = host->main();
  lua_getglobal(L, "co");
  lua_State* co = lua_tothread(L, -1);
  // Its next instruction ran the hook, which set the count the new big
  // string allows (without the charge it would still be 1,000: the
  // coroutine ran three more instructions).
  EXPECT_EQ(lua_gethookcount(co), host->budget()->Cap());
  EXPECT_LT(lua_gethookcount(co), CpuBudget::kHookEvery);
  lua_pop(L, 1);
}

// ---------------------------------------------------------------- close

TEST_F(TickingBudgetTest, CloseRunsEveryCloseHandlerUnderOneBudget) {
  ASSERT_NO_FATAL_FAILURE(Make(0, 100 * kMs));
  Define(R"(
    function stuck()
      local x <close> = setmetatable({}, {__close = function() while true do end end})
      coroutine.yield("INDEFINITELY")
    end)");
  for (int i = 0; i < 20; ++i) Start("stuck");
  const int64_t t0 = clock.mono;
  sched->CancelAll();
  // Twenty handlers, one budget: each used to get a fresh 100 ms.
  EXPECT_LT(clock.mono - t0, 300 * kMs);
  EXPECT_EQ(sched->task_count(), 0u);
  EXPECT_EQ(rec.ends.size(), 20u);
  EXPECT_FALSE(host->budget()->active());
  EXPECT_EQ(RunLua(host, "return 'usable'"), "ok:usable");
}

TEST_F(TickingBudgetTest, CloseWithoutATaskTimeoutRunsHandlersThatEnd) {
  ASSERT_NO_FATAL_FAILURE(Make(5 * kMs, 0));
  Define(R"(
    closed = 0
    function waiter()
      local x <close> = setmetatable({}, {__close = function() closed = closed + 1 end})
      coroutine.yield("INDEFINITELY")
    end)");
  for (int i = 0; i < 5; ++i) Start("waiter");
  sched->CancelAll();
  EXPECT_EQ(Global("closed"), 5);
}

// ---------------------------------------------------------------- the main thread

TEST_F(FakeBudgetTest, TheMainThreadIsNeverResumedClosedOrStartedFromLua) {
  ASSERT_NO_FATAL_FAILURE(Make(0, 0));
  Define(R"(
    MAIN = coroutine.running()
    function hijack()
      local r = {}
      r[1] = select(2, coroutine.resume(MAIN))
      r[2] = select(2, pcall(coroutine.close, MAIN))
      r[3] = coroutine.status(MAIN)
      r[4] = select(2, pcall(tasks.start, MAIN)):gsub("to '[%w%.]+'", "to 'start'")  -- Lua names it by a table it finds
      r[5] = tostring(coroutine.isyieldable(MAIN))
      result = table.concat(r, "|")
    end)");
  Start("hijack");
  lua_State* L = host->main();
  lua_getglobal(L, "result");
  const std::string result = lua_tostring(L, -1);
  lua_pop(L, 1);
  EXPECT_EQ(result,
            "cannot resume the runtime's main thread (it runs the calls from JS; it is no coroutine)|"
            "cannot close the runtime's main thread (it runs the calls from JS; it is no coroutine)|normal|"
            "bad argument #1 to 'start' (the runtime's main thread cannot become a task (it runs the calls from "
            "JS))|false");
  // The traceback handler in the main thread's slot 1 is intact.
  EXPECT_EQ(RunLua(host, "error('after')"), "err:test:1: after");
  EXPECT_EQ(RunLua(host, "return coroutine.status(MAIN)"), "ok:running");
}

// ---- CpuBudget alone: windows, deadlines and the stop check ----------------------
// No Lua state and no scheduler: the window arithmetic, on a clock moved by hand.

// A FakeClock that counts its readings.
class CountingClock final : public Clock {
 public:
  int64_t MonoNs() const override {
    ++reads;
    return mono;
  }
  int64_t WallNs() const override { return mono; }
  int64_t mono = 1'000 * kMs;
  mutable int reads = 0;
};

TEST(CpuBudgetWindow, ADeadlineIsTheTimeoutLessWhatTheTaskUsedAndStopDueSeesIt) {
  CountingClock clock;
  CpuBudget budget(&clock, 0, 100 * kMs);
  const int64_t t0 = clock.mono;
  const CpuBudget::Window outer = budget.Open(30 * kMs, true, t0);
  EXPECT_FALSE(outer.active);
  clock.mono = t0 + 69 * kMs;
  EXPECT_FALSE(budget.StopDue());
  EXPECT_FALSE(budget.killing());
  clock.mono = t0 + 70 * kMs;  // 30 used before + 70 now: the 100 ms budget
  EXPECT_TRUE(budget.StopDue());
  EXPECT_TRUE(budget.killing());
  bool killed = false;
  EXPECT_EQ(budget.Close(outer, &killed, t0 + 75 * kMs), 75 * kMs);
  EXPECT_TRUE(killed);
  EXPECT_FALSE(budget.active());
  EXPECT_FALSE(budget.killing());
}

TEST(CpuBudgetWindow, ATaskThatUsedItsWholeBudgetDiesAtOnce) {
  CountingClock clock;
  CpuBudget budget(&clock, 0, 100 * kMs);
  const CpuBudget::Window outer = budget.Open(150 * kMs, true, clock.mono);
  clock.mono += 1;
  EXPECT_TRUE(budget.StopDue());
  bool killed = false;
  budget.Close(outer, &killed, clock.mono);
  EXPECT_TRUE(killed);
}

TEST(CpuBudgetWindow, WithoutATaskTimeoutTheStopCheckReadsNoClock) {
  CountingClock clock;
  CpuBudget budget(&clock, 10 * kMs, 0);  // a timeSlice alone
  EXPECT_TRUE(budget.enabled());
  const CpuBudget::Window outer = budget.Open(0, true, clock.mono);
  clock.reads = 0;
  clock.mono += 1'000'000 * kMs;
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(budget.StopDue());
  EXPECT_EQ(clock.reads, 0);
  bool killed = true;
  budget.Close(outer, &killed, clock.mono);
  EXPECT_FALSE(killed);
  EXPECT_FALSE(CpuBudget(&clock, 0, 0).enabled());
}

TEST(CpuBudgetWindow, OutsideAnyWindowNothingIsDue) {
  CountingClock clock;
  CpuBudget budget(&clock, 0, 100 * kMs);
  clock.mono += 1'000'000 * kMs;
  EXPECT_FALSE(budget.StopDue());
  EXPECT_EQ(clock.reads, 0);
}

TEST(CpuBudgetWindow, ANestedWindowKeepsTheOuterDeadlineOrItsOwnWhenThatEndsFirst) {
  CountingClock clock;
  CpuBudget budget(&clock, 0, 100 * kMs);
  const int64_t t0 = clock.mono;
  const CpuBudget::Window none = budget.Open(0, true, t0);  // deadline t0 + 100
  // A call from JS inside it (not a task): the outer deadline alone.
  const CpuBudget::Window task = budget.Open(0, false, t0 + 10 * kMs);
  clock.mono = t0 + 100 * kMs;
  EXPECT_TRUE(budget.StopDue());
  bool killed = false;
  budget.Close(task, &killed, clock.mono);
  EXPECT_TRUE(killed);
  EXPECT_TRUE(budget.killing());  // the outer deadline's kill goes on to the entry point
  budget.Close(none, &killed, clock.mono);
  EXPECT_TRUE(killed);

  // A task started 10 ms in that has used 95 ms of its own: its own deadline
  // (t0 + 15) comes first, and its kill ends with it.
  const CpuBudget::Window none2 = budget.Open(0, true, t0);
  const CpuBudget::Window outer = budget.Open(95 * kMs, true, t0 + 10 * kMs);
  clock.mono = t0 + 15 * kMs;
  EXPECT_TRUE(budget.StopDue());
  budget.Close(outer, &killed, clock.mono);
  EXPECT_TRUE(killed);
  EXPECT_FALSE(budget.killing());  // the outer window runs on
  budget.Close(none2, &killed, clock.mono);
  EXPECT_FALSE(killed);
}

TEST(CpuBudgetWindow, AWindowOpenedPastTheOuterDeadlineStartsKilling) {
  CountingClock clock;
  CpuBudget budget(&clock, 0, 100 * kMs);
  const int64_t t0 = clock.mono;
  const CpuBudget::Window none = budget.Open(0, true, t0);
  const CpuBudget::Window outer = budget.Open(0, true, t0 + 100 * kMs);
  EXPECT_TRUE(budget.killing());
  bool killed = false;
  budget.Close(outer, &killed, t0 + 100 * kMs);
  budget.Close(none, &killed, t0 + 100 * kMs);
  EXPECT_TRUE(killed);
}

TEST(CpuBudgetWindow, ASharedWindowHasOneSliceAndNoDeadline) {
  CountingClock clock;
  CpuBudget budget(&clock, 10 * kMs, 100 * kMs);
  const int64_t t0 = clock.mono;
  const CpuBudget::Window none = budget.OpenShared(t0);
  clock.mono = t0 + 1'000 * kMs;
  EXPECT_FALSE(budget.StopDue());  // each task it runs opens its own deadline
  const CpuBudget::Window shared = budget.Open(0, true, t0 + 5 * kMs);
  clock.mono = t0 + 105 * kMs;
  EXPECT_TRUE(budget.StopDue());  // the task's own 100 ms
  bool killed = false;
  EXPECT_EQ(budget.Close(shared, &killed, clock.mono), 100 * kMs);
  EXPECT_TRUE(killed);
  EXPECT_FALSE(budget.killing());
  EXPECT_EQ(budget.Close(none, &killed, clock.mono), 105 * kMs);
  EXPECT_FALSE(killed);
}

TEST(CpuBudgetWindow, BigStringsCapTheHookCountInProportionToTheirSize) {
  CountingClock clock;
  size_t big = 0;
  CpuBudget budget(&clock, 0, 80 * kMs, &big);  // aims at 10 ms between clock reads
  EXPECT_EQ(budget.Cap(), CpuBudget::kHookEvery);
  big = size_t{1} << 20;  // 1 MiB at 0.1 ns a byte: about 105 us an instruction
  EXPECT_EQ(budget.Cap(), 95);
  big = size_t{1} << 40;
  EXPECT_EQ(budget.Cap(), 1);
  big = 1;
  EXPECT_EQ(budget.Cap(), CpuBudget::kHookEvery);
  EXPECT_EQ(CpuBudget(&clock, 10 * kMs, 0, &big).Cap(), CpuBudget::kHookEvery);  // no taskTimeout: no cap
}

}  // namespace
}  // namespace lua_tasks
