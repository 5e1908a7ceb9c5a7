// SPDX-License-Identifier: MIT
// Tests for Scheduler with a fake clock: waits, ordering, resume, cancel, stale timers.
#include "core/scheduling/scheduler.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/host/lua_runtime.hpp"
#include "test_clocks.hpp"
#include "test_hosts.hpp"

namespace lua_tasks {
namespace {

class Recorder final : public SchedulerHooks {
 public:
  void OnTaskEnd(Task& task, lua_State* co, const TaskEnding& end) override {
    std::string v = end.kind == TaskEnd::kDone ? "done" : end.kind == TaskEnd::kCancelled ? "cancelled" : "failed";
    if (end.kind == TaskEnd::kTimedOut) {
      v += ":timeout";
    } else if (end.kind == TaskEnd::kFailed) {
      v += std::string(":") + lua_tostring(co, -1);
    }
    ends.push_back(v);
  }
  void OnScheduleChange() override {}
  void OnCommit(Task& task) override {
    committing.push_back(task.key);
    if (fail_at_once != nullptr) {  // the snapshot cannot be taken: fails before any write
      lua_pushboolean(task.co, 0);
      lua_pushstring(task.co, fail_at_once);
      sched->FinishCommit(&task, 2);
    }
  }
  // Async contexts: numbered in capture order.
  uint32_t CaptureContext(bool) override { return ++captured; }
  void RetainContext(uint32_t context) override { retained.push_back(context); }
  void ReleaseContext(uint32_t context) override { released.push_back(context); }
  uint32_t captured = 0;
  std::vector<uint32_t> retained;
  std::vector<uint32_t> released;
  std::vector<uint64_t> committing;
  std::vector<std::string> ends;
  Scheduler* sched = nullptr;
  const char* fail_at_once = nullptr;
};

constexpr int64_t kMs = 1'000'000;

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LuaHostOptions o;
    std::string error;
    ASSERT_TRUE(rt.Assemble(o, &clock, &rec, &error)) << error;
    host = rt.host.get();
    sched = rt.scheduler.get();
    Run("log = {} function note(s) log[#log + 1] = s end");
  }
  void Run(const std::string& src) {
    lua_State* L = host->main();
    ASSERT_EQ(host->Load(L, src, "=test"), LUA_OK) << lua_tostring(L, -1);
    LuaHost::Entry e(host, L);
    ASSERT_EQ(host->PCall(L, 0, 0), LUA_OK) << host->last_message();
  }
  uint64_t Start(const std::string& global) {
    lua_State* L = host->main();
    lua_getglobal(L, global.c_str());
    return sched->Start(L, 0, true);
  }
  std::string Log() { return GlobalLog(host->main()); }
  // Advances the fake clock and runs what a loop turn would.
  void Turn(int64_t ns) {
    clock.Advance(ns);
    sched->RunTimers();
    sched->RunImmediate();
  }

  FakeClock clock;
  Recorder rec;
  LuaRuntime rt;  // after what it points to: freed first
  LuaHost* host = nullptr;
  Scheduler* sched = nullptr;
};

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

}  // namespace
}  // namespace lua_tasks

namespace lua_tasks {
namespace {

// Settles the oldest COMMIT in flight as written: (true, nil) onto the task.
void Written(Scheduler* sched, Recorder* rec) {
  ASSERT_FALSE(rec->committing.empty());
  Task* t = sched->Find(rec->committing.front());
  rec->committing.erase(rec->committing.begin());
  ASSERT_NE(t, nullptr);
  lua_pushboolean(t->co, 1);
  lua_pushnil(t->co);
  sched->FinishCommit(t, 2);
}

TEST_F(SchedulerTest, TheSnapshotLockHoldsBackTimersStartsAndResumes) {
  Run(R"(function committer() note("commit") coroutine.yield("COMMIT", "x") note("after") end
         function sleeper() coroutine.yield("FOR", 1) note("slept") end
         function waiter() note("waiting") local v = coroutine.yield("INDEFINITELY") note("got " .. v) end
         function late() note("late start") end)");
  sched->set_has_store(true);
  const uint64_t w = Start("waiter");
  Start("sleeper");
  const uint64_t c = Start("committer");
  EXPECT_EQ(rec.committing, std::vector<uint64_t>{c});
  EXPECT_FALSE(sched->locked());  // a committer holds no lock of its own
  sched->Lock();                  // the embedder's, while it takes the snapshot
  Start("late");
  lua_State* L = host->main();
  lua_pushliteral(L, "v");
  EXPECT_EQ(sched->Resume(w, L, 1), Scheduler::ResumeResult::kResumed);
  Turn(5000 * kMs);  // the sleeper's timer is due, but the lock holds it
  EXPECT_EQ(Log(), "waiting,commit");
  sched->Unlock();  // the snapshot is taken: the write's I/O begins
  // At the unlock: the deferred start and resume, in order, then the timer
  // that came due. The committer still waits for its write.
  EXPECT_EQ(Log(), "waiting,commit,late start,got v,slept");
  ASSERT_NO_FATAL_FAILURE(Written(sched, &rec));
  EXPECT_EQ(Log(), "waiting,commit,late start,got v,slept");  // it continues in the check phase
  Turn(0);
  EXPECT_EQ(Log(), "waiting,commit,late start,got v,slept,after");
}

// Group commit across tasks: while one COMMIT's write is in flight, the
// runtime's other tasks run, and their COMMITs wait for the next write.
TEST_F(SchedulerTest, OtherTasksRunAndCommitWhileAWriteIsInFlight) {
  Run(R"(function committer(n) note("c" .. n) coroutine.yield("COMMIT") note("after " .. n) end)");
  sched->set_has_store(true);
  for (int i = 1; i <= 3; ++i) {
    lua_State* L = host->main();
    lua_getglobal(L, "committer");
    lua_pushinteger(L, i);
    ASSERT_NE(sched->Start(L, 1, true), 0u);
  }
  EXPECT_EQ(Log(), "c1,c2,c3");
  EXPECT_EQ(rec.committing.size(), 3u);
  EXPECT_FALSE(sched->locked());
  for (int i = 0; i < 3; ++i) ASSERT_NO_FATAL_FAILURE(Written(sched, &rec));
  Turn(0);
  EXPECT_EQ(Log(), "c1,c2,c3,after 1,after 2,after 3");
}

// The committer continues behind the tasks that were ready before it, so it
// cannot continue inside FinishCommit and take the lock again at once.
TEST_F(SchedulerTest, TheCommitterContinuesAfterTheTasksReadyBeforeIt) {
  Run(R"(function committer() coroutine.yield("COMMIT") note("after") end
         function spinner() for i = 1, 2 do coroutine.yield() note("spin " .. i) end end)");
  sched->set_has_store(true);
  Start("spinner");  // IMMEDIATE: ready before the committer
  Start("committer");
  ASSERT_NO_FATAL_FAILURE(Written(sched, &rec));
  EXPECT_EQ(Log(), "");  // nothing runs inside FinishCommit but held-back work
  EXPECT_TRUE(sched->HasReady());
  Turn(0);
  EXPECT_EQ(Log(), "spin 1,after");
  Turn(0);
  EXPECT_EQ(Log(), "spin 1,after,spin 2");
  EXPECT_EQ(sched->task_count(), 0u);
}

TEST_F(SchedulerTest, DueTimersRunAtTheUnlockBeforeALoopingCommitterLocksAgain) {
  Run(R"(function committer() for i = 1, 3 do coroutine.yield("COMMIT") note("c" .. i) end end
         function sleeper() for i = 1, 3 do coroutine.yield("FOR", 10, "MILLISECONDS") note("s" .. i) end end)");
  sched->set_has_store(true);
  Start("sleeper");
  Start("committer");
  for (int i = 0; i < 3; ++i) {
    clock.Advance(15 * kMs);  // the write takes 15 ms: the sleeper falls due meanwhile
    sched->RunTimers();       // the timer phase during the write: held back
    ASSERT_NO_FATAL_FAILURE(Written(sched, &rec));
    sched->RunImmediate();  // the check phase: the committer continues, and commits again
  }
  EXPECT_EQ(Log(), "s1,c1,s2,c2,s3,c3");
}

TEST_F(SchedulerTest, TwoCommittingLoopsAlternate) {
  Run(R"(function mk(name) return function()
           for i = 1, 3 do note(name .. i) coroutine.yield("COMMIT") end end end
         a, b = mk("a"), mk("b"))");
  sched->set_has_store(true);
  Start("a");
  Start("b");  // deferred by a's lock
  while (!rec.committing.empty()) {
    ASSERT_NO_FATAL_FAILURE(Written(sched, &rec));
    Turn(0);
  }
  EXPECT_EQ(Log(), "a1,b1,a2,b2,a3,b3");
  EXPECT_EQ(sched->task_count(), 0u);
}

// The embedder may hold its lock while it settles committers (a write that
// failed before its I/O): no Lua runs until it lets go.
TEST_F(SchedulerTest, NoLuaRunsWhileTheEmbeddersLockRemains) {
  Run(R"(function committer() coroutine.yield("COMMIT") note("after") end
         function late() note("late") end
         function sleeper() coroutine.yield("FOR", 1) note("slept") end)");
  sched->set_has_store(true);
  Start("sleeper");
  Start("committer");
  sched->Lock();
  Start("late");
  clock.Advance(2000 * kMs);
  ASSERT_NO_FATAL_FAILURE(Written(sched, &rec));
  EXPECT_TRUE(sched->locked());
  sched->RunImmediate();
  sched->RunTimers();
  EXPECT_EQ(Log(), "");
  sched->Unlock();
  EXPECT_EQ(Log(), "late,slept");
  Turn(0);
  EXPECT_EQ(Log(), "late,slept,after");
}

TEST_F(SchedulerTest, ACommitterQueuedToContinueCanBeCancelledButNotResumed) {
  Run(R"(function committer() local x <close> = setmetatable({}, {__close = function() note("closed") end})
           coroutine.yield("COMMIT") note("after") end)");
  sched->set_has_store(true);
  const uint64_t c = Start("committer");
  ASSERT_NO_FATAL_FAILURE(Written(sched, &rec));
  lua_State* L = host->main();
  const int base = lua_gettop(L);
  lua_pushliteral(L, "v");
  EXPECT_EQ(sched->Resume(c, L, 1), Scheduler::ResumeResult::kNotResumable);
  EXPECT_EQ(lua_gettop(L), base);
  EXPECT_TRUE(sched->Cancel(c));
  Turn(0);
  EXPECT_EQ(Log(), "closed");
  EXPECT_EQ(rec.ends, std::vector<std::string>{"cancelled"});
  EXPECT_EQ(sched->task_count(), 0u);
}

// The committer's entry stays queued, stale, after a cancel: it must not
// wake the task that takes over its Task, with or without the values.
TEST_F(SchedulerTest, AStaleContinueEntryNeverWakesTheTaskThatReusesItsSlot) {
  Run(R"(function committer() coroutine.yield("COMMIT") note("after") end
         function parked() local v = coroutine.yield("INDEFINITELY") note("woken " .. tostring(v)) end)");
  sched->set_has_store(true);
  const uint64_t c = Start("committer");
  const Task* tc = sched->Find(c);
  ASSERT_NO_FATAL_FAILURE(Written(sched, &rec));
  ASSERT_TRUE(sched->Cancel(c));
  const uint64_t p = Start("parked");
  ASSERT_EQ(sched->Find(p), tc);  // the parked task took over the committer's Task
  Turn(0);
  Turn(0);
  EXPECT_EQ(Log(), "");
  lua_State* L = host->main();
  lua_pushliteral(L, "v");
  EXPECT_EQ(sched->Resume(p, L, 1), Scheduler::ResumeResult::kResumed);
  EXPECT_EQ(Log(), "woken v");
}

TEST_F(SchedulerTest, CancellingACommitterLeavesTheEmbeddersLockHeld) {
  Run(R"(function committer() coroutine.yield("COMMIT") end
         function late() note("late") end)");
  sched->set_has_store(true);
  const uint64_t c = Start("committer");
  sched->Lock();  // the embedder's, for the write
  Start("late");
  EXPECT_TRUE(sched->Cancel(c));
  EXPECT_TRUE(sched->locked());
  EXPECT_EQ(Log(), "");
  sched->Unlock();
  EXPECT_FALSE(sched->locked());
  EXPECT_EQ(Log(), "late");
}
TEST_F(SchedulerTest, IdsAreLongerThanLuaInternsAndSortInStartOrder) {
  const std::string a = sched->IdOf(1);
  const std::string b = sched->IdOf(36);
  const std::string c = sched->IdOf(UINT64_MAX);
  EXPECT_EQ(a.size(), 41u);  // Lua interns strings of up to 40 bytes
  EXPECT_EQ(a.substr(0, 28), sched->id_prefix());
  EXPECT_EQ(a[0], 't');
  EXPECT_EQ(a[27], '-');
  EXPECT_EQ(a.substr(28), "0000000000001");
  EXPECT_EQ(b.substr(28), "0000000000010");
  EXPECT_EQ(c.substr(28), "3w5e11264sgsf");
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  uint64_t key = 0;
  EXPECT_TRUE(sched->ParseId(c, &key));
  EXPECT_EQ(key, UINT64_MAX);
  EXPECT_TRUE(sched->ParseId(b, &key));
  EXPECT_EQ(key, 36u);
  // Around the boundaries of the digit groups FormatId works in (36^6, 36^12).
  const uint64_t g = 2176782336ull;  // 36^6
  EXPECT_EQ(sched->IdOf(g - 1).substr(28), "0000000zzzzzz");
  EXPECT_EQ(sched->IdOf(g).substr(28), "0000001000000");
  EXPECT_EQ(sched->IdOf(g * g - 1).substr(28), "0zzzzzzzzzzzz");
  EXPECT_EQ(sched->IdOf(g * g).substr(28), "1000000000000");
  for (uint64_t k : std::initializer_list<uint64_t>{g - 1, g, g + 1, g * g - 1, g * g, g * g + 1, 0x123456789abcdefull,
                                                    UINT64_MAX - 1}) {
    EXPECT_TRUE(sched->ParseId(sched->IdOf(k), &key));
    EXPECT_EQ(key, k);
  }
  EXPECT_FALSE(sched->ParseId(sched->id_prefix() + "10", &key));             // not the 13-digit form
  EXPECT_FALSE(sched->ParseId(sched->id_prefix() + "3w5e11264sgsg", &key));  // past 2^64
  EXPECT_FALSE(sched->ParseId(sched->id_prefix() + "000000000000A", &key));
  std::string other = b;
  other[1] = other[1] == 'a' ? 'b' : 'a';
  EXPECT_FALSE(sched->ParseId(other, &key));  // another runtime's
  std::string error;
  auto other_host = LuaHost::Create(LuaHostOptions{}, &error);
  ASSERT_TRUE(other_host) << error;
  Scheduler second(other_host.get(), &clock, &rec);
  EXPECT_NE(second.id_prefix(), sched->id_prefix());  // random per scheduler
}

TEST_F(SchedulerTest, ACoroutineWhoseStartALockDeferredCannotBeStartedAgain) {
  Run(R"(co = coroutine.create(function() note("ran") end))");
  sched->Lock();
  EXPECT_NE(Start("co"), 0u);  // deferred: it has not run yet
  EXPECT_EQ(Start("co"), 0u);  // the same coroutine again: refused
  sched->Unlock();
  EXPECT_EQ(Log(), "ran");     // once
  EXPECT_EQ(Start("co"), 0u);  // dead now
}

TEST_F(SchedulerTest, AFailedCommitRaisesAtTheYield) {
  Run(R"(function committer() local ok, err = pcall(coroutine.yield, "COMMIT") note(tostring(ok) .. " " .. err) end)");
  sched->set_has_store(true);
  const uint64_t c = Start("committer");
  Task* t = sched->Find(c);
  lua_pushboolean(t->co, 0);
  lua_pushliteral(t->co, "disk full");
  sched->FinishCommit(t, 2);
  EXPECT_FALSE(sched->locked());
  EXPECT_EQ(Log(), "");
  Turn(0);
  EXPECT_EQ(Log(), "false disk full");
}

// A COMMIT that fails before its write (OnCommit settles it at once) takes
// the same way back: a loop of them cannot hold the loop inside one start.
TEST_F(SchedulerTest, ACommitFailingAtOnceContinuesThroughTheReadyQueue) {
  Run(R"(function committer() for i = 1, 3 do local ok, err = pcall(coroutine.yield, "COMMIT") note(err) end end)");
  sched->set_has_store(true);
  rec.sched = sched;
  rec.fail_at_once = "bad state";
  Start("committer");
  EXPECT_FALSE(sched->locked());
  EXPECT_EQ(Log(), "");
  Turn(0);
  EXPECT_EQ(Log(), "bad state");
  Turn(0);
  Turn(0);
  EXPECT_EQ(Log(), "bad state,bad state,bad state");
  EXPECT_EQ(sched->task_count(), 0u);
}

TEST_F(SchedulerTest, ACommitterWhoseWriteIsInFlightCanBeCancelled) {
  Run(R"(function committer() coroutine.yield("COMMIT") note("after") end function other() note("other") end)");
  sched->set_has_store(true);
  const uint64_t c = Start("committer");
  Start("other");  // runs at once: the committer holds no lock
  EXPECT_EQ(Log(), "other");
  EXPECT_TRUE(sched->Cancel(c));
  EXPECT_FALSE(sched->locked());
  EXPECT_EQ(rec.ends, (std::vector<std::string>{"done", "cancelled"}));  // other's end, then the committer's
  Turn(0);
  EXPECT_EQ(Log(), "other");
}

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

// Mailboxes: tasks.send / Scheduler::Send queue messages
// whatever the task is doing; tasks.receive takes them in order.
namespace lua_tasks {
namespace {

// Sends the strings in `values` as one message from the main thread.
Scheduler::SendResult SendStrings(Scheduler* sched, LuaHost* host, uint64_t key, std::vector<const char*> values) {
  lua_State* L = host->main();
  for (const char* v : values) {
    if (v == nullptr) {
      lua_pushnil(L);
    } else {
      lua_pushstring(L, v);
    }
  }
  return sched->Send(key, L, static_cast<int>(values.size()));
}

constexpr char kReceiver[] = R"(function receiver(n)
  for _ = 1, n or 3 do
    local a, b, c = tasks.receive()
    note(tostring(a) .. "/" .. tostring(b) .. "/" .. tostring(c) .. "#" .. select("#", a, b, c))
  end
end)";

TEST_F(SchedulerTest, MessagesArriveInOrderWithTheirValuesThroughTheReadyQueue) {
  Run(kReceiver);
  const uint64_t key = Start("receiver");
  Task* t = sched->Find(key);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->wait, WaitKind::kReceive);
  EXPECT_EQ(SendStrings(sched, host, key, {"a"}), Scheduler::SendResult::kQueued);
  EXPECT_EQ(SendStrings(sched, host, key, {"b", nullptr, "c"}), Scheduler::SendResult::kQueued);
  EXPECT_EQ(Log(), "");  // a send never runs the task itself
  Turn(0);
  EXPECT_EQ(Log(), "a/nil/nil#3,b/nil/c#3");
  EXPECT_EQ(SendStrings(sched, host, key, {"d", "e"}), Scheduler::SendResult::kQueued);
  Turn(0);
  EXPECT_EQ(Log(), "a/nil/nil#3,b/nil/c#3,d/e/nil#3");
  EXPECT_EQ(rec.ends, std::vector<std::string>{"done"});
}

TEST_F(SchedulerTest, ReceiveTimesOutWithNilAndTimeoutInItsUnit) {
  Run(R"(function t()
           local v, why = tasks.receive(50, "MILLISECONDS") note(tostring(v) .. " " .. why)
           v, why = tasks.receive(0) note(tostring(v) .. " " .. why)
           v = tasks.receive(1) note(v)
         end)");
  const uint64_t key = Start("t");
  Turn(49 * kMs);
  EXPECT_EQ(Log(), "");
  Turn(1 * kMs);
  EXPECT_EQ(Log(), "nil timeout,nil timeout");  // receive(0) answers at once
  SendStrings(sched, host, key, {"in time"});
  Turn(0);
  EXPECT_EQ(Log(), "nil timeout,nil timeout,in time");
  Turn(5000 * kMs);  // its cancelled timer wakes nothing
  EXPECT_EQ(rec.ends, std::vector<std::string>{"done"});
}

TEST_F(SchedulerTest, MessagesSentDuringACommitWaitForTheTask) {
  Run(R"(function t()
           coroutine.yield("COMMIT") note("committed")
           for _ = 1, 2 do note(tasks.receive()) end
         end)");
  sched->set_has_store(true);
  const uint64_t key = Start("t");
  EXPECT_EQ(SendStrings(sched, host, key, {"m1"}), Scheduler::SendResult::kQueued);
  EXPECT_EQ(SendStrings(sched, host, key, {"m2"}), Scheduler::SendResult::kQueued);
  // Not resumable meanwhile, as before: resume keeps its semantics.
  lua_pushliteral(host->main(), "x");
  EXPECT_EQ(sched->Resume(key, host->main(), 1), Scheduler::ResumeResult::kNotResumable);
  ASSERT_NO_FATAL_FAILURE(Written(sched, &rec));
  Turn(0);
  EXPECT_EQ(Log(), "committed,m1,m2");
}

TEST_F(SchedulerTest, ARunningTaskCanSendToItselfAndToOthers) {
  Run(kReceiver);
  Run(R"(function sender(to)
           assert(tasks.send(tasks.current_id(), "self"))
           note("got " .. tasks.receive())
           assert(tasks.send(to, "x", 1))
           note("sent")
         end)");
  const uint64_t r = Start("receiver");
  lua_State* L = host->main();
  lua_getglobal(L, "sender");
  lua_pushstring(L, sched->IdOf(r).c_str());
  sched->Start(L, 1, true);
  EXPECT_EQ(Log(), "got self,sent");
  Turn(0);
  EXPECT_EQ(Log(), "got self,sent,x/1/nil#3");
}

TEST_F(SchedulerTest, ReceiveIsNotAYieldInstructionSoResumeCannotEndIt) {
  Run(kReceiver);
  const uint64_t key = Start("receiver");
  lua_pushliteral(host->main(), "v");
  EXPECT_EQ(sched->Resume(key, host->main(), 1), Scheduler::ResumeResult::kNotResumable);
  EXPECT_EQ(Log(), "");
  EXPECT_STREQ(WaitKindName(sched->Find(key)->wait), "RECEIVE");
}

TEST_F(SchedulerTest, ASendToAnEndedOrCancelledTaskIsRefusedAndItsMessagesAreFreed) {
  Run(kReceiver);
  Run(R"(function poll() local v, why = tasks.receive(0) note(tostring(v) .. " " .. tostring(why)) end
         function waiter() coroutine.yield("INDEFINITELY") end)");
  const uint64_t w = Start("waiter");
  SendStrings(sched, host, w, {"lost"});
  SendStrings(sched, host, w, {"lost too"});
  const int mailbox = sched->Find(w)->mailbox;
  ASSERT_NE(mailbox, LUA_NOREF);
  EXPECT_TRUE(sched->Cancel(w));
  EXPECT_EQ(SendStrings(sched, host, w, {"late"}), Scheduler::SendResult::kNotFound);
  // The registry slot went back (the next ref reuses it) ...
  lua_State* L = host->main();
  lua_newtable(L);
  const int again = luaL_ref(L, LUA_REGISTRYINDEX);
  EXPECT_EQ(again, mailbox);
  luaL_unref(L, LUA_REGISTRYINDEX, again);
  // ... and a task reusing the ended Task finds an empty mailbox.
  Start("poll");
  EXPECT_EQ(Log(), "nil timeout");
  EXPECT_EQ(SendStrings(sched, host, 999, {"x"}), Scheduler::SendResult::kNotFound);
}

TEST_F(SchedulerTest, AFullMailboxRefusesASendUntilTheTaskTakesOne) {
  sched->set_mailbox_limit(2);
  Run(R"(function t() coroutine.yield("INDEFINITELY") note(tasks.receive()) coroutine.yield("INDEFINITELY") end
         function full(id) local ok, err = pcall(tasks.send, id, "z") note(tostring(ok) .. " " .. err) end)");
  const uint64_t key = Start("t");
  const int top = lua_gettop(host->main());
  EXPECT_EQ(SendStrings(sched, host, key, {"a"}), Scheduler::SendResult::kQueued);
  EXPECT_EQ(SendStrings(sched, host, key, {"b"}), Scheduler::SendResult::kQueued);
  EXPECT_EQ(SendStrings(sched, host, key, {"c"}), Scheduler::SendResult::kFull);
  EXPECT_EQ(lua_gettop(host->main()), top);  // popped in every case
  Run("full('" + sched->IdOf(key) + "')");
  EXPECT_NE(Log().find("false tasks.send: the task's mailbox is full (2 messages, the runtime's mailboxLimit option)"),
            std::string::npos)
      << Log();
  lua_pushnil(host->main());
  EXPECT_EQ(sched->Resume(key, host->main(), 1), Scheduler::ResumeResult::kResumed);
  EXPECT_EQ(SendStrings(sched, host, key, {"c"}), Scheduler::SendResult::kQueued);
}

TEST_F(SchedulerTest, SendAndReceiveRefuseMisuse) {
  Run(R"(function check(f, ...) local ok, err = pcall(f, ...) note(err) end)");
  Run(R"(check(tasks.send, "x", nil, 1)
         check(tasks.send, "x")
         check(tasks.receive)
         check(tasks.receive, -1)
         check(tasks.receive, 1, "fortnights"))");
  const std::string log = Log();
  EXPECT_NE(log.find("bad argument #2 to 'tasks.send' (a message's first value must not be nil"), std::string::npos)
      << log;
  EXPECT_NE(log.find("tasks.receive: not inside a task"), std::string::npos) << log;
  EXPECT_NE(log.find("bad argument #1 to 'tasks.receive' (timeout must be a finite number"), std::string::npos) << log;
  EXPECT_NE(log.find("bad argument #2 to 'tasks.receive' (unknown time unit"), std::string::npos) << log;
}

TEST_F(SchedulerTest, ReceiveInsideANestedCoroutineSuspendsTheTask) {
  Run(R"(function t()
           local co = coroutine.wrap(function() note("inner " .. tasks.receive()) return "back" end)
           note(co())
         end)");
  const uint64_t key = Start("t");
  SendStrings(sched, host, key, {"m"});
  Turn(0);
  EXPECT_EQ(Log(), "inner m,back");
}

}  // namespace
}  // namespace lua_tasks
