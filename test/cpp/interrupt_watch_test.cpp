// SPDX-License-Identifier: MIT
// InterruptWatch: Lua spinning with no limit set is stopped when the poll says so.
#include "interrupt_watch.hpp"

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "lua_runtime.hpp"
#include "test_clocks.hpp"
#include "test_hosts.hpp"

namespace lua_tasks {
namespace {

struct Poll {
  std::atomic<bool> stop{false};
  std::atomic<int> asked{0};
  static bool Ask(void* ctx) {
    auto* p = static_cast<Poll*>(ctx);
    ++p->asked;
    return p->stop.load();
  }
};

// The poll answers "stop" from 150 ms on, as Node-API does once a Worker is terminated.
std::thread StopLater(Poll* poll) {
  return std::thread([poll] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    poll->stop = true;
  });
}

class NoHooks final : public SchedulerHooks {
 public:
  void OnTaskEnd(Task&, lua_State*, const TaskEnding&) override {}
  void OnScheduleChange() override {}
  void OnCommit(Task&) override {}
};

// A runtime as the addon assembles one: the host, a scheduler and the tasks
// API (whose coroutine.resume keeps LuaHost::running()).
struct Runtime {
  FakeClock clock;
  NoHooks hooks;
  LuaRuntime lua;  // after what it points to: freed first
  LuaHost* get() const { return lua.host.get(); }
  bool terminating() const { return lua.host->terminating(); }
};

std::unique_ptr<Runtime> InterruptibleHost(Poll* poll) {
  auto rt = std::make_unique<Runtime>();
  LuaHostOptions o;
  o.interruptible = true;
  std::string error;
  EXPECT_TRUE(rt->lua.Assemble(o, &rt->clock, &rt->hooks, &error)) << error;
  rt->lua.host->set_interrupt_poll(&Poll::Ask, poll);
  return rt;
}

TEST(InterruptWatchTest, StopsALoopWithNoLimitOnceThePollSaysSo) {
  ASSERT_NE(InterruptWatch::Signal(), 0);
  Poll poll;
  auto rt = InterruptibleHost(&poll);
  LuaHost* host = rt->get();
  std::thread stopper = StopLater(&poll);
  const std::string out = RunLua(host, "while true do pcall(function() while true do end end) end");
  stopper.join();
  EXPECT_NE(out.find("shutting down"), std::string::npos) << out;
  EXPECT_TRUE(host->terminating());
  // Once stopped, Lua stays stopped: a new call is stopped at its first instruction.
  EXPECT_NE(RunLua(host, "local x = 0 for i = 1, 10 do x = x + i end return x").find("shutting down"),
            std::string::npos);
}

TEST(InterruptWatchTest, ReachesACoroutineResumedByLua) {
  Poll poll;
  auto rt = InterruptibleHost(&poll);
  LuaHost* host = rt->get();
  std::thread stopper = StopLater(&poll);
  const std::string out =
      RunLua(host, "while true do coroutine.resume(coroutine.create(function() while true do end end)) end");
  stopper.join();
  EXPECT_NE(out.find("shutting down"), std::string::npos) << out;
}

TEST(InterruptWatchTest, LongLuaThatIsNotStoppedRunsToItsEnd) {
  Poll poll;
  auto rt = InterruptibleHost(&poll);
  LuaHost* host = rt->get();
  // About half a second of Lua: the watch samples it several times and asks.
  const std::string out = RunLua(host, R"(
    local t0, n = os.clock(), 0
    while os.clock() - t0 < 0.5 do n = n + 1 end
    return n > 0)");
  EXPECT_EQ(out, "ok:true");
  EXPECT_GE(poll.asked.load(), 1);
  EXPECT_FALSE(host->terminating());
}

TEST(InterruptWatchTest, HostsOnOneThreadShareOneWatch) {
  EXPECT_EQ(InterruptWatch::ForThisThread(), InterruptWatch::ForThisThread());
  std::shared_ptr<InterruptWatch> other;
  std::thread([&] { other = InterruptWatch::ForThisThread(); }).join();
  EXPECT_NE(other, InterruptWatch::ForThisThread());
}

}  // namespace
}  // namespace lua_tasks
