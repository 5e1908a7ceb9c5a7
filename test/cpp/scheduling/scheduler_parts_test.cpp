// SPDX-License-Identifier: MIT
// Tests for detached parts with a fake clock: a coroutine that waits under coroutine.resume runs on by itself.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/host/lua_runtime.hpp"
#include "core/scheduling/scheduler.hpp"
#include "test_clocks.hpp"
#include "test_hosts.hpp"

namespace lua_tasks {
namespace {

class Ends final : public SchedulerHooks {
 public:
  void OnTaskEnd(Task& task, lua_State* co, const TaskEnding& end) override {
    std::string v = end.kind == TaskEnd::kDone ? "done" : end.kind == TaskEnd::kCancelled ? "cancelled" : "failed";
    if (end.kind == TaskEnd::kTimedOut) {
      v += ":timeout";
    } else if (end.kind == TaskEnd::kFailed) {
      v += std::string(":") + lua_tostring(co, -1);
      if (end.trace != nullptr && end.trace->source != nullptr) v += std::string(" @") + end.trace->source;
    }
    ends.push_back(v);
  }
  void OnScheduleChange() override {}
  void OnCommit(Task& task) override {}
  std::vector<std::string> ends;
};

constexpr int64_t kMs = 1'000'000;

// The seed's fan-out: a counter, one coroutine per item, a wait loop.
constexpr const char* kFanOut = R"(
  function fanout(n, secs)
    local active = 0
    for i = 1, n do
      local co = coroutine.create(function()
        active = active + 1
        note("start " .. i)
        tasks.sleep(secs)
        note("end " .. i)
        active = active - 1
      end)
      coroutine.resume(co)
    end
    while active > 0 do coroutine.yield() end
    note("all done")
  end)";

class PartsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LuaHostOptions o;
    std::string error;
    ASSERT_TRUE(rt.Assemble(o, &clock, &ends, &error)) << error;
    host = rt.host.get();
    sched = rt.scheduler.get();
    Run("log = {} function note(s) log[#log + 1] = s end");
    Run(kFanOut);
  }
  void Run(const std::string& src) {
    lua_State* L = host->main();
    ASSERT_EQ(host->Load(L, src, "=test"), LUA_OK) << lua_tostring(L, -1);
    LuaHost::Entry e(host, L);
    ASSERT_EQ(host->PCall(L, 0, 0), LUA_OK) << host->last_message();
  }
  uint64_t Start(const std::string& global, int a = -1, double b = 0) {
    lua_State* L = host->main();
    lua_getglobal(L, global.c_str());
    int n = 0;
    if (a >= 0) {
      lua_pushinteger(L, a);
      lua_pushnumber(L, b);
      n = 2;
    }
    return sched->Start(L, n, true);
  }
  std::string Log() { return GlobalLog(host->main()); }
  void Turn(int64_t ns) {
    clock.Advance(ns);
    sched->RunTimers();
    sched->RunImmediate();
  }

  FakeClock clock;
  Ends ends;
  LuaRuntime rt;  // after what it points to: freed first
  LuaHost* host = nullptr;
  Scheduler* sched = nullptr;
};

TEST_F(PartsTest, TheSeedsFanOutWaitsSideBySide) {
  Start("fanout", 5, 1.0);
  EXPECT_EQ(Log(), "start 1,start 2,start 3,start 4,start 5");
  EXPECT_EQ(sched->task_count(), 1u);  // the parts are no tasks
  Turn(999 * kMs);
  EXPECT_EQ(Log(), "start 1,start 2,start 3,start 4,start 5");
  Turn(1 * kMs);  // one second for all five (they waited at once), then the wait loop sees none active
  EXPECT_EQ(Log(), "start 1,start 2,start 3,start 4,start 5,end 1,end 2,end 3,end 4,end 5,all done");
  EXPECT_EQ(ends.ends, std::vector<std::string>{"done"});
  EXPECT_EQ(sched->task_count(), 0u);
  EXPECT_EQ(sched->tasks().size(), 0u);
}

TEST_F(PartsTest, ADetachedCoroutineIsNormalUntilItYieldsThenItsResumerGetsTheValues) {
  Run(R"(function t()
    local co = coroutine.create(function(a)
      local r = tasks.sleep(1)
      local b = coroutine.yield(a, r)
      return b
    end)
    note(table.concat({tostring(select("#", coroutine.resume(co, "x")))}, " "))
    note(coroutine.status(co))
    note(tostring(select(2, coroutine.resume(co))))
    note(tostring(select(2, pcall(coroutine.close, co))):match("detached part") or "closed")
    coroutine.yield("FOR", 2)
    note(coroutine.status(co))
    local ok, a, r = coroutine.resume(co, "dropped")
    note(tostring(ok) .. " " .. a .. " " .. r)
    note(coroutine.status(co))
    note(table.concat({tostring(select(2, coroutine.resume(co, "b")))}, " "))
    note(coroutine.status(co))
  end)");
  Start("t");
  EXPECT_EQ(Log(), "1,normal,cannot resume non-suspended coroutine,detached part");
  Turn(2000 * kMs);
  EXPECT_EQ(Log(),
            "1,normal,cannot resume non-suspended coroutine,detached part,suspended,true x SCHEDULER,suspended,b,dead");
  EXPECT_EQ(ends.ends, std::vector<std::string>{"done"});
}

TEST_F(PartsTest, APartsIdIsItsTasksAndItReceivesTheTasksMessages) {
  Run(R"(function t()
    local co = coroutine.create(function()
      note(tostring(tasks.current_id() == ID))
      note(tasks.receive())
    end)
    ID = tasks.current_id()
    coroutine.resume(co)
    coroutine.yield("FOR", 1)
  end)");
  const uint64_t key = Start("t");
  EXPECT_EQ(Log(), "true");
  lua_State* L = host->main();
  lua_pushliteral(L, "hello");
  EXPECT_EQ(sched->Send(key, L, 1), Scheduler::SendResult::kQueued);
  Turn(0);
  EXPECT_EQ(Log(), "true,hello");
  Turn(1000 * kMs);
  EXPECT_EQ(ends.ends, std::vector<std::string>{"done"});
}

TEST_F(PartsTest, AnErrorInAPartFailsTheTaskAndClosesItAndTheOtherParts) {
  Run(R"(local function closer(s) return setmetatable({}, {__close = function() note(s .. " closed") end}) end
    function t()
      local main <close> = closer("task")
      coroutine.resume(coroutine.create(function()
        local c <close> = closer("slow")
        tasks.sleep(10)
      end))
      coroutine.resume(coroutine.create(function()
        local c <close> = closer("bad")
        tasks.sleep(1)
        error("boom")
      end))
      coroutine.yield("INDEFINITELY")
    end)");
  Start("t");
  Turn(1000 * kMs);
  EXPECT_EQ(Log(), "bad closed,task closed,slow closed");
  ASSERT_EQ(ends.ends.size(), 1u);
  EXPECT_NE(ends.ends[0].find("failed:test:11: boom @test"), std::string::npos) << ends.ends[0];
  EXPECT_EQ(sched->tasks().size(), 0u);
  Turn(10000 * kMs);  // the slow part's timer is stale
  EXPECT_EQ(Log(), "bad closed,task closed,slow closed");
}

TEST_F(PartsTest, TheTaskEndingOrCancelledClosesItsWaitingParts) {
  Run(R"(local function closer(s) return setmetatable({}, {__close = function() note(s .. " closed") end}) end
    function waits(name)
      coroutine.resume(coroutine.create(function()
        local c <close> = closer(name)
        tasks.sleep(10)
        note("never")
      end))
    end
    function returns() waits("a") end
    function cancelled() waits("b") coroutine.yield("INDEFINITELY") end)");
  Start("returns");
  EXPECT_EQ(Log(), "a closed");
  const uint64_t key = Start("cancelled");
  EXPECT_EQ(sched->task_count(), 1u);
  EXPECT_TRUE(sched->Cancel(key));
  EXPECT_EQ(Log(), "a closed,b closed");
  EXPECT_EQ(ends.ends, (std::vector<std::string>{"done", "cancelled"}));
  Turn(10000 * kMs);
  EXPECT_EQ(Log(), "a closed,b closed");
  EXPECT_EQ(sched->tasks().size(), 0u);
}

TEST_F(PartsTest, APartThatCancelsItsTaskEndsItAfterItsRun) {
  Run(R"(function t()
    coroutine.resume(coroutine.create(function()
      tasks.sleep(1)
      note("cancel " .. tostring(tasks.cancel(tasks.current_id())))
      note("still running")
    end))
    coroutine.yield("INDEFINITELY")
  end)");
  Start("t");
  Turn(1000 * kMs);
  EXPECT_EQ(Log(), "cancel true,still running");
  EXPECT_EQ(ends.ends, std::vector<std::string>{"cancelled"});
  EXPECT_EQ(sched->tasks().size(), 0u);
}

TEST_F(PartsTest, WrapAndResumeInlineStillSuspendTheWholeTask) {
  Run(R"(function t()
    local gen = coroutine.wrap(function() for i = 1, 2 do tasks.sleep(1) coroutine.yield(i) end end)
    note("wrap " .. gen() .. gen())
    local co = coroutine.create(function(x) tasks.sleep(1) return x * 2 end)
    note("inline " .. select(2, tasks.resume_inline(co, 21)))
  end)");
  Start("t");
  Turn(1000 * kMs);
  EXPECT_EQ(Log(), "");
  Turn(1000 * kMs);
  EXPECT_EQ(Log(), "wrap 12");
  Turn(1000 * kMs);
  EXPECT_EQ(Log(), "wrap 12,inline 42");
  EXPECT_EQ(ends.ends, std::vector<std::string>{"done"});
}

TEST_F(PartsTest, APartStartedInsideAPartAndYieldInstructionsInOneArePlainValues) {
  Run(R"(function t()
    local done = 0
    coroutine.resume(coroutine.create(function()
      tasks.sleep(1)
      local inner = coroutine.create(function() tasks.sleep(1) done = done + 1 end)
      coroutine.resume(inner)
      note("inner " .. coroutine.status(inner))
      coroutine.yield("FOR", 100)  -- a plain yield: parks it, no wait
      note("never")
    end))
    while done == 0 do coroutine.yield() end
    note("done")
  end)");
  Start("t");
  Turn(1000 * kMs);
  EXPECT_EQ(Log(), "inner normal");
  Turn(1000 * kMs);
  EXPECT_EQ(Log(), "inner normal,done");
  EXPECT_EQ(ends.ends, std::vector<std::string>{"done"});
  EXPECT_EQ(sched->tasks().size(), 0u);
}

TEST_F(PartsTest, APartCannotResumeOrWaitForItsOwnTask) {
  Run(R"(function t()
    local id = tasks.current_id()
    coroutine.resume(coroutine.create(function()
      tasks.sleep(1)
      note(select(2, pcall(tasks.resume, id)))
      note(select(2, pcall(tasks.wait, id)))
    end))
    coroutine.yield("INDEFINITELY")
  end)");
  const uint64_t key = Start("t");
  Turn(1000 * kMs);
  const std::string log = Log();
  EXPECT_NE(log.find("tasks.resume: a task cannot resume itself (it is running),"), std::string::npos) << log;
  EXPECT_NE(log.find("tasks.wait: a task cannot wait for itself"), std::string::npos) << log;
  EXPECT_TRUE(sched->Cancel(key));
}

// A part runs under its task's budget: its time counts with the task's.
TEST(PartsBudgetTest, APartPastTheTaskTimeoutKillsTheTask) {
  TickingClock clock;
  Ends ends;
  LuaRuntime rt;
  LuaHostOptions o;
  o.task_timeout_ns = 200'000'000;
  o.clock = &clock;
  std::string error;
  ASSERT_TRUE(rt.Assemble(o, &clock, &ends, &error)) << error;
  lua_State* L = rt.host->main();
  ASSERT_EQ(luaL_dostring(L, R"(
    function t()
      coroutine.resume(coroutine.create(function() tasks.sleep(0) while true do end end))
      coroutine.yield("INDEFINITELY")
    end)"),
            LUA_OK);
  lua_getglobal(L, "t");
  rt.scheduler->Start(L, 0, true);
  for (int i = 0; i < 10 && rt.scheduler->task_count() > 0; ++i) rt.scheduler->RunTimers();
  EXPECT_EQ(ends.ends, std::vector<std::string>{"failed:timeout"});
  EXPECT_EQ(rt.scheduler->tasks().size(), 0u);
}

// With a timeSlice a part that runs long is preempted like a task, and its
// task's code runs in between.
TEST(PartsBudgetTest, APartIsPreemptedAtTheSliceAndItsTaskRunsMeanwhile) {
  TickingClock clock;
  Ends ends;
  LuaRuntime rt;
  LuaHostOptions o;
  o.time_slice_ns = 5'000'000;
  o.clock = &clock;
  std::string error;
  ASSERT_TRUE(rt.Assemble(o, &clock, &ends, &error)) << error;
  lua_State* L = rt.host->main();
  ASSERT_EQ(luaL_dostring(L, R"(
    log = ""
    function t()
      local done = false
      coroutine.resume(coroutine.create(function()
        tasks.sleep(0)
        log = log .. "part "
        local x = 0
        for i = 1, 1e6 do x = x + 1 end
        log = log .. "done "
        done = true
      end))
      while not done do
        if log:sub(-5) == "part " then log = log .. "task " end
        coroutine.yield()
      end
    end)"),
            LUA_OK);
  lua_getglobal(L, "t");
  rt.scheduler->Start(L, 0, true);
  for (int i = 0; i < 100000 && rt.scheduler->task_count() > 0; ++i) {
    rt.scheduler->RunTimers();
    rt.scheduler->RunImmediate();
  }
  lua_getglobal(L, "log");
  EXPECT_STREQ(lua_tostring(L, -1), "part task done ");
  EXPECT_EQ(ends.ends, std::vector<std::string>{"done"});
}

}  // namespace
}  // namespace lua_tasks
