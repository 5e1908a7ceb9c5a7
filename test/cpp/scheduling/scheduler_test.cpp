// SPDX-License-Identifier: MIT
// Tests for Scheduler with a fake clock: waits, ordering, resume, cancel, stale timers.
#include "core/scheduling/scheduler.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "scheduling/scheduler_fixture.hpp"

namespace lua_tasks {
namespace {

using namespace scheduler_testing;  // the fixture (scheduler_fixture.hpp)

TEST_F(SchedulerTest, ForWakesAfterTheDurationWithElapsedInItsUnit) {
  Run(R"(function t() local r, e, u = coroutine.yield("FOR", 50, "MILLISECONDS")
         note(r .. " " .. string.format("%.1f", e) .. " " .. u) end)");
  Start("t");
  Turn(49 * kMs);
  EXPECT_EQ(Log(), "");
  Turn(1 * kMs);
  EXPECT_EQ(Log(), "SCHEDULER 50.0 MILLISECONDS");
  EXPECT_EQ(rec.ends, std::vector<std::string>{"done"});
  EXPECT_EQ(sched->task_count(), 0u);
}

// The durable unit is made only when something durable is asked for: a
// runtime of ephemeral tasks runs, joins, sends and looks up ids with none.
TEST_F(SchedulerTest, ARuntimeWithoutDurableTasksHasNoReplayer) {
  Run(R"(function child() return tasks.receive() end
         function t()
           local id = tasks.start(child)
           tasks.send(id, "hi")
           note(tasks.wait(id))
           local _, why = tasks.wait("t" .. string.rep("0", 40))
           note(why)
           note(tostring(tasks.status(id)))
           note(tostring(pcall(tasks.start_durable, "child")))
         end)");
  Start("t");
  Turn(0);
  EXPECT_EQ(rec.ends, std::vector<std::string>{"done"});
  EXPECT_EQ(Log(), "hi,no such task (unknown, or finished too long ago),done,false");
  EXPECT_EQ(sched->replayer(), nullptr);
}

// SchedulerHooks' async contexts: none for a task that ends in its first
// run; one for a task that outlives it, captured before its start returns
// (or at once, for a start a COMMIT lock defers); tasks it starts from Lua
// share it (captured for it first while it is in its first run); every
// reference a task holds is given back when it ends.
TEST_F(SchedulerTest, ContextIsCapturedOnlyForTasksThatOutliveTheirFirstRun) {
  Run(R"(function quick() end
         function sleeper() coroutine.yield("IMMEDIATE") end
         function child() coroutine.yield("IMMEDIATE") end
         function parent() tasks.start(child) coroutine.yield("IMMEDIATE") tasks.start(child) end)");
  Start("quick");
  EXPECT_EQ(rec.captured, 0u);
  const uint64_t s = Start("sleeper");
  EXPECT_EQ(rec.captured, 1u);
  EXPECT_EQ(sched->Find(s)->context, 1u);
  const uint64_t p = Start("parent");
  EXPECT_EQ(rec.captured, 2u);  // the parent's, captured at its first child's start
  EXPECT_EQ(sched->Find(p)->context, 2u);
  EXPECT_EQ(rec.retained, std::vector<uint32_t>{2});
  Turn(0);
  EXPECT_EQ(rec.retained, (std::vector<uint32_t>{2, 2}));
  Turn(0);
  EXPECT_EQ(sched->task_count(), 0u);
  EXPECT_EQ(rec.captured, 2u);
  std::vector<uint32_t> released = rec.released;
  std::sort(released.begin(), released.end());
  EXPECT_EQ(released, (std::vector<uint32_t>{1, 2, 2, 2}));  // the sleeper; the parent and its two children
  sched->Lock();
  Start("quick");  // deferred: it first runs at the unlock, in whatever call unlocks
  EXPECT_EQ(rec.captured, 3u);
  sched->Unlock();
  EXPECT_EQ(rec.released.back(), 3u);
}

// rt.task(id).waiting.until: a FOR wait's end read on the wall clock now,
// an UNTIL_TIME's its target, and nothing for waits with no end.
TEST_F(SchedulerTest, WaitEndsWallNsReadsAForDeadlineOnTheWallClockNow) {
  Run(R"(function f() coroutine.yield("FOR", 50, "MILLISECONDS") end
         function s() tasks.sleep(2) end
         function u(at) coroutine.yield("UNTIL_TIME", at) end
         function i() coroutine.yield("INDEFINITELY") end)");
  const int64_t wall0 = clock.wall;
  const uint64_t f = Start("f");
  const uint64_t s = Start("s");
  const uint64_t i = Start("i");
  EXPECT_EQ(sched->WaitEndsWallNs(*sched->Find(f)), wall0 + 50 * kMs);
  EXPECT_EQ(sched->WaitEndsWallNs(*sched->Find(s)), wall0 + 2000 * kMs);
  EXPECT_EQ(sched->WaitEndsWallNs(*sched->Find(i)), std::nullopt);
  Turn(20 * kMs);
  clock.wall += 3600'000 * kMs;  // the wall clock is set forward an hour: the FOR end moves with it
  EXPECT_EQ(sched->WaitEndsWallNs(*sched->Find(f)), clock.wall + 30 * kMs);
  lua_State* L = host->main();
  lua_getglobal(L, "u");
  lua_pushinteger(L, (clock.wall + 10'000 * kMs) / 1'000'000'000);
  const uint64_t u = sched->Start(L, 1, true);
  ASSERT_NE(sched->Find(u), nullptr);
  EXPECT_EQ(sched->WaitEndsWallNs(*sched->Find(u)), (clock.wall + 10'000 * kMs) / 1'000'000'000 * 1'000'000'000);
}

// Ended tasks are kept for reuse while queue entries may name them: an
// entry left by a cancelled task must not wake the task that reuses it.
TEST_F(SchedulerTest, AStaleReadyEntryNeverWakesTheTaskThatReusesItsSlot) {
  Run(R"(function a() coroutine.yield() note("a") end
         function b() coroutine.yield() note("b") coroutine.yield("INDEFINITELY") end)");
  const uint64_t ka = Start("a");
  const Task* ta = sched->Find(ka);
  ASSERT_TRUE(sched->Cancel(ka));  // its IMMEDIATE entry stays queued, stale
  const uint64_t kb = Start("b");
  ASSERT_EQ(sched->Find(kb), ta);  // b took over a's Task
  Turn(0);
  EXPECT_EQ(Log(), "b");
  Turn(0);
  EXPECT_EQ(Log(), "b");  // woken once, and its INDEFINITELY holds
  EXPECT_EQ(sched->task_count(), 1u);
}

TEST_F(SchedulerTest, EndedTasksKeptForReuseStayBoundedWhileTheReadyQueueNeverEmpties) {
  // A task yielding IMMEDIATE forever keeps the ready queue non-empty while
  // thousands of others end (some cancelled with an entry still queued).
  Run(R"(function spin() while true do coroutine.yield() end end
         function nap() coroutine.yield("FOR", 1) end
         function queued() coroutine.yield() end)");
  Start("spin");
  for (int i = 0; i < 3000; ++i) Start("nap");
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(sched->Cancel(Start("queued")));
  Turn(2000 * kMs);  // every nap ends in this turn's timer batch
  Turn(0);
  EXPECT_LE(sched->spare_count(), Scheduler::kSpareKept);
  EXPECT_EQ(sched->task_count(), 1u);
}

TEST_F(SchedulerTest, ATimerBatchSkipsATaskResumedOrReplacedEarlierInTheBatch) {
  // Both fall due in one batch; the first resumes the second (which then
  // waits anew) and cancels a third, whose Task a new task takes over.
  Run(R"(function first() coroutine.yield("FOR", 1)
           note("first") tasks.resume(second_id, "by first") tasks.cancel(third_id)
           fresh_id = tasks.start(function() coroutine.yield("FOR", 5) note("fresh") end) end
         function second() local r = coroutine.yield("FOR", 1) note("second " .. r)
           r = coroutine.yield("FOR", 5) note("second " .. r) end
         function third() coroutine.yield("FOR", 1) note("third") end)");
  Start("first");
  const Task* third = nullptr;
  {
    lua_State* L = host->main();
    const uint64_t k2 = Start("second");
    const uint64_t k3 = Start("third");
    char buf[Scheduler::kIdLength];
    lua_pushlstring(L, buf, sched->FormatId(k2, buf));
    lua_setglobal(L, "second_id");
    lua_pushlstring(L, buf, sched->FormatId(k3, buf));
    lua_setglobal(L, "third_id");
    third = sched->Find(k3);
  }
  Turn(1000 * kMs);
  ASSERT_EQ(sched->task_count(), 2u);  // second, fresh
  bool fresh_took_third = false;
  sched->tasks().ForEach([&](const Task& t) { fresh_took_third = fresh_took_third || &t == third; });
  EXPECT_TRUE(fresh_took_third);
  EXPECT_EQ(Log(), "first,second by first");
  Turn(4000 * kMs);
  EXPECT_EQ(Log(), "first,second by first");
  Turn(1000 * kMs);
  EXPECT_EQ(Log(), "first,second by first,second SCHEDULER,fresh");
  EXPECT_EQ(sched->task_count(), 0u);
}

TEST_F(SchedulerTest, TheCollectorTurnsIncrementalOnceManyTasksAreAlive) {
  lua_State* L = host->main();
  // Asking for a mode answers the previous one: the host starts generational.
  ASSERT_EQ(lua_gc(L, LUA_GCGEN, 0, 0), LUA_GCGEN);
  Run("function park() coroutine.yield('INDEFINITELY') end");
  for (size_t i = 0; i < Scheduler::kIncrementalAt; ++i) Start("park");
  EXPECT_EQ(lua_gc(L, LUA_GCGEN, 0, 0), LUA_GCGEN);  // still: not past the threshold yet
  Start("park");
  EXPECT_EQ(lua_gc(L, LUA_GCGEN, 0, 0), LUA_GCINC);  // switched by that start
  // Once switched it stays: the check above put it back to generational,
  // and more starts leave that choice alone.
  Start("park");
  EXPECT_EQ(lua_gc(L, LUA_GCINC, 0, 0, 0), LUA_GCGEN);
  sched->CancelAll();
  EXPECT_EQ(sched->task_count(), 0u);
}

TEST_F(SchedulerTest, TasksReadyAtTheSameInstantRunFirstInFirstOut) {
  Run(R"(function mk(i) return function() coroutine.yield("FOR", 1) note(i) end end
         for i = 1, 5 do _G["t" .. i] = mk(i) end)");
  for (int i = 1; i <= 5; ++i) Start("t" + std::to_string(i));
  Turn(1000 * kMs);
  EXPECT_EQ(Log(), "1,2,3,4,5");
}

TEST_F(SchedulerTest, ImmediateReyieldRunsInTheNextBatch) {
  Run(R"(function t() for i = 1, 3 do note("a" .. i) coroutine.yield() end end
         function u() for i = 1, 3 do note("b" .. i) coroutine.yield("IMMEDIATE") end end)");
  Start("t");
  Start("u");
  EXPECT_EQ(Log(), "a1,b1");
  sched->RunImmediate();
  EXPECT_EQ(Log(), "a1,b1,a2,b2");
  sched->RunImmediate();
  EXPECT_EQ(Log(), "a1,b1,a2,b2,a3,b3");
}

TEST_F(SchedulerTest, ResumeByIdReturnsExactlyTheValuesAndCancelsTheTimer) {
  Run(R"(function t() local a, b = coroutine.yield("FOR", 10) note(tostring(a) .. tostring(b))
         coroutine.yield("FOR", 100) note("second") end)");
  const uint64_t key = Start("t");
  lua_State* L = host->main();
  lua_pushinteger(L, 1);
  lua_pushinteger(L, 2);
  EXPECT_EQ(sched->Resume(key, L, 2), Scheduler::ResumeResult::kResumed);
  EXPECT_EQ(Log(), "12");
  Turn(10'000 * kMs);  // the first timer is stale: it must not wake the second wait
  EXPECT_EQ(Log(), "12");
  Turn(90'000 * kMs);
  EXPECT_EQ(Log(), "12,second");
}

// A new thread has about 40 stack slots and Lua checks none when values move
// between threads (outside debug builds): these overran the task's stack.
TEST_F(SchedulerTest, StartAndResumeMoveMoreValuesThanANewThreadHolds) {
  Run(R"(function count(...) note(select('#', ...)) note(select('#', coroutine.yield("INDEFINITELY"))) end)");
  lua_State* L = host->main();
  const int base = lua_gettop(L);
  ASSERT_TRUE(lua_checkstack(L, 4001));
  lua_getglobal(L, "count");
  for (int i = 0; i < 3000; ++i) lua_pushinteger(L, i);
  const uint64_t key = sched->Start(L, 3000, true);
  ASSERT_NE(key, 0u);
  for (int i = 0; i < 4000; ++i) lua_pushinteger(L, i);
  EXPECT_EQ(sched->Resume(key, L, 4000), Scheduler::ResumeResult::kResumed);
  EXPECT_EQ(Log(), "3000,4000");
  EXPECT_EQ(lua_gettop(L), base);
}

TEST_F(SchedulerTest, AResumePastTheStackLimitIsRefusedAndTheTaskStaysWaiting) {
  Run(R"(function deep() local t = {} for i = 1, 999000 do t[i] = i end
         local function hold(...) return coroutine.yield("INDEFINITELY") end
         note(select('#', hold(table.unpack(t)))) end)");
  const uint64_t key = Start("deep");
  lua_State* L = host->main();
  const int base = lua_gettop(L);
  ASSERT_TRUE(lua_checkstack(L, 20000));
  for (int i = 0; i < 20000; ++i) lua_pushinteger(L, i);
  EXPECT_EQ(sched->Resume(key, L, 20000), Scheduler::ResumeResult::kNoStackRoom);
  EXPECT_EQ(lua_gettop(L), base);
  lua_pushinteger(L, 1);
  EXPECT_EQ(sched->Resume(key, L, 1), Scheduler::ResumeResult::kResumed);
  EXPECT_EQ(Log(), "1");
}

// Lua code can hold a task's coroutine (coroutine.running()); the mark lets
// the Lua glue refuse coroutine.resume and coroutine.close on it.
TEST_F(SchedulerTest, ATaskCoroutineIsMarkedUntilTheTaskEnds) {
  Run(R"(function t() co = coroutine.running() coroutine.yield("INDEFINITELY") end)");
  const uint64_t key = Start("t");
  lua_State* L = host->main();
  lua_getglobal(L, "co");
  lua_State* co = lua_tothread(L, -1);
  EXPECT_TRUE(LuaHost::HasTaskMark(co));
  EXPECT_FALSE(LuaHost::HasTaskMark(L));
  EXPECT_EQ(LuaHost::From(co), host);  // the mark leaves the host pointer readable
  Run(R"(ok, err = coroutine.resume(co) note(tostring(ok) .. ": " .. err))");
  EXPECT_EQ(Log(), "false: cannot resume a task's coroutine (resume the task: tasks.resume(id))");
  EXPECT_EQ(sched->Resume(key, L, 0), Scheduler::ResumeResult::kResumed);
  EXPECT_FALSE(LuaHost::HasTaskMark(co));
  lua_pop(L, 1);
}

// The collector walks anchors in slot order; a task anchored at its
// coroutine's arena slot is met in memory order (see ThreadArena).
TEST_F(SchedulerTest, ATaskIsAnchoredAtItsCoroutinesArenaSlot) {
  Run(R"(function t() coroutine.yield("INDEFINITELY") end)");
  std::vector<uint64_t> keys;
  for (int i = 0; i < 5; ++i) keys.push_back(Start("t"));
  lua_State* L = host->main();
  Run("co = coroutine.create(t)");  // a coroutine made by Lua code, then started as a task
  lua_getglobal(L, "co");
  keys.push_back(sched->Start(L, 0, true));
  for (uint64_t key : keys) {
    const Task* t = sched->Find(key);
    ASSERT_NE(t, nullptr);
    const uint32_t slot = host->memory().arena().SlotOf(t->co);
    EXPECT_NE(slot, ThreadArena::kNoSlot);
    EXPECT_EQ(t->anchor, slot);
  }
}

TEST_F(SchedulerTest, ResumeOfUnknownOrNonResumableTasksIsRefused) {
  lua_State* L = host->main();
  EXPECT_EQ(sched->Resume(999, L, 0), Scheduler::ResumeResult::kNotFound);
  Run(R"(function t() tasks.wait(tasks.start(function() coroutine.yield("INDEFINITELY") end)) end)");
  const uint64_t key = Start("t");
  EXPECT_EQ(sched->Resume(key, L, 0), Scheduler::ResumeResult::kNotResumable);  // joining
}

TEST_F(SchedulerTest, CancelDuringEveryWaitRunsCloseVariables) {
  Run(R"(function mk(...) local args = {...} return function()
           local guard <close> = setmetatable({}, {__close = function() note("closed " .. args[1]) end})
           coroutine.yield(table.unpack(args)) end end
         a = mk("FOR", 5) b = mk("INDEFINITELY") c = mk("IMMEDIATE") d = mk("UNTIL_TIME", os.time() + 60))");
  for (const char* g : {"a", "b", "c", "d"}) {
    const uint64_t key = Start(g);
    EXPECT_TRUE(sched->Cancel(key));
  }
  EXPECT_EQ(Log(), "closed FOR,closed INDEFINITELY,closed IMMEDIATE,closed UNTIL_TIME");
  Turn(100'000 * kMs);
  EXPECT_EQ(rec.ends, (std::vector<std::string>{"cancelled", "cancelled", "cancelled", "cancelled"}));
  EXPECT_FALSE(sched->HasTimers());
}

TEST_F(SchedulerTest, UntilTimeIsAWallClockDeadlineReArmedWhenTheClockMovesBack) {
  Run(R"(function t(at) coroutine.yield("UNTIL_TIME", at, "MILLISECONDS") note("woke") end)");
  lua_State* L = host->main();
  lua_getglobal(L, "t");
  lua_pushinteger(L, clock.wall / kMs + 1000);
  sched->Start(L, 1, true);
  clock.wall -= 500 * kMs;  // the clock is set back half a second
  Turn(1000 * kMs);
  EXPECT_EQ(Log(), "");
  Turn(500 * kMs);
  EXPECT_EQ(Log(), "woke");
}

TEST_F(SchedulerTest, BadYieldsRaiseAtTheYieldWithTheCallersLine) {
  Run(R"(function t()
    for _, args in ipairs({{"NOPE"}, {"FOR", -1}, {"FOR", 1, "FORTNIGHTS"}, {"FOR", 0/0}, {"FOR", 1e300},
                           {"UNTIL_TIME", "soon"}, {42}}) do
      local ok, err = pcall(coroutine.yield, table.unpack(args))
      note(tostring(ok) .. ":" .. err)
    end
  end)");
  Start("t");
  const std::string log = Log();
  EXPECT_NE(log.find("unknown yield instruction \"NOPE\""), std::string::npos) << log;
  EXPECT_NE(log.find("FOR duration must be >= 0, got -1 SECONDS"), std::string::npos) << log;
  EXPECT_NE(log.find("unknown time unit \"FORTNIGHTS\""), std::string::npos) << log;
  EXPECT_NE(log.find("must be finite"), std::string::npos) << log;
  EXPECT_NE(log.find("too large"), std::string::npos) << log;
  EXPECT_NE(log.find("UNTIL_TIME needs a number"), std::string::npos) << log;
  EXPECT_NE(log.find("bad yield instruction: 42"), std::string::npos) << log;
  EXPECT_EQ(log.find("true"), std::string::npos) << log;
}

TEST_F(SchedulerTest, SleepInsideNestedCoroutinesSuspendsTheWholeTask) {
  Run(R"(function t()
    local gen = coroutine.wrap(function()
      for i = 1, 3 do tasks.sleep(1) coroutine.yield(i) end
    end)
    for _ = 1, 3 do note("got " .. gen()) end
  end)");
  Start("t");
  EXPECT_EQ(Log(), "");
  Turn(1000 * kMs);
  EXPECT_EQ(Log(), "got 1");
  Turn(1000 * kMs);
  Turn(1000 * kMs);
  EXPECT_EQ(Log(), "got 1,got 2,got 3");
  EXPECT_EQ(rec.ends, std::vector<std::string>{"done"});
}

TEST_F(SchedulerTest, WaitJoinsATaskAndReRaisesItsError) {
  Run(R"(function t()
    local a = tasks.start(function() coroutine.yield("FOR", 1) return 7, 8 end)
    local b = tasks.start(function() error("boom", 0) end)
    local x, y = tasks.wait(a)
    note(x .. "+" .. y)
    note(select(2, pcall(tasks.wait, b)))
  end)");
  Start("t");
  Turn(1000 * kMs);
  EXPECT_EQ(Log(), "7+8,boom");
}

// A task's single number or boolean is kept without a registry reference:
// each kind comes back as it was, from a wait after the end.
TEST_F(SchedulerTest, WaitAfterTheEndGivesBackASingleValueAsItWas) {
  Run(R"(function t()
    local ids = {}
    for i, v in ipairs({7, 2.5, 3.0, true, false, "s", {1}}) do
      ids[i] = tasks.start(function() return v end)
    end
    local e = tasks.start(function() error(42, 0) end)
    for i = 1, #ids do
      local v = tasks.wait(ids[i])
      note(type(v) .. ":" .. (math.type(v) or tostring(type(v) == "table" and v[1] or v)))
    end
    local ok, err = pcall(tasks.wait, e)
    note(tostring(ok) .. ":" .. math.type(err) .. ":" .. err)
  end)");
  Start("t");
  Turn(0);
  EXPECT_EQ(Log(),
            "number:integer,number:float,number:float,boolean:true,boolean:false,string:s,table:1,"
            "false:integer:42");
}

}  // namespace
}  // namespace lua_tasks
