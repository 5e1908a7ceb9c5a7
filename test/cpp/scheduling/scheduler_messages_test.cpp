// SPDX-License-Identifier: MIT
// Tests for mailboxes: Send and tasks.send queue messages whatever the task does; tasks.receive takes them in order.
#include "core/scheduling/scheduler.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "scheduling/scheduler_fixture.hpp"

namespace lua_tasks {
namespace {

using namespace scheduler_testing;  // the fixture (scheduler_fixture.hpp)

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
