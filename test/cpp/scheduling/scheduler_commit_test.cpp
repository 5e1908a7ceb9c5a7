// SPDX-License-Identifier: MIT
// Tests for Scheduler's COMMIT: the snapshot lock, committers in flight, failed and cancelled commits.
#include "core/scheduling/scheduler.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "scheduling/scheduler_fixture.hpp"

namespace lua_tasks {
namespace {

using namespace scheduler_testing;  // the fixture (scheduler_fixture.hpp)

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

}  // namespace
}  // namespace lua_tasks
