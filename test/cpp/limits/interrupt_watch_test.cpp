// SPDX-License-Identifier: MIT
// InterruptWatch: Lua spinning with no limit set is stopped when the poll says so.
#include "core/limits/interrupt_watch.hpp"

#include <atomic>
#include <chrono>
#include <thread>

#include <pthread.h>

#include <gtest/gtest.h>

#include "core/host/lua_runtime.hpp"
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

std::unique_ptr<Runtime> InterruptibleHost(Poll* poll, int64_t task_timeout_ns = 0) {
  auto rt = std::make_unique<Runtime>();
  LuaHostOptions o;
  o.interruptible = true;
  o.task_timeout_ns = task_timeout_ns;
  o.clock = &rt->clock;
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

// The watch asks every 100 ms while Lua runs on. Each time, lua_sethook would
// walk the whole call stack (it marks every frame), and a stack overflow on
// its way is 200,000 frames deep: under load one walk took longer than the
// period, so the thread did nothing but walk (the sanitizer run's hang). Here
// the signal comes every 100 us, which one walk outlasts on any machine;
// the deep call must still finish, with and without a CPU budget.
void RunsDeepWhileAskedAgainAndAgain(int64_t task_timeout_ns) {
  Poll poll;
  auto rt = InterruptibleHost(&poll, task_timeout_ns);  // a FakeClock: the budget never runs out
  LuaHost* host = rt->get();
  const int sig = InterruptWatch::Signal();
  ASSERT_NE(sig, 0);
  const pthread_t owner = pthread_self();
  std::atomic<bool> done{false};
  std::thread asker([&] {
    // At most 20 s: without the fix the call below would never end.
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done.load() && std::chrono::steady_clock::now() < end) {
      pthread_kill(owner, sig);
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  const std::string out =
      RunLua(host, "local function f(n) if n == 0 then return 0 end return 1 + f(n - 1) end return f(150000)");
  const auto took = std::chrono::steady_clock::now() - t0;
  done = true;
  asker.join();
  EXPECT_EQ(out, "ok:150000");
  EXPECT_LT(took, std::chrono::seconds(10));
  EXPECT_GE(poll.asked.load(), 1);  // the hook did run and ask
  EXPECT_FALSE(host->terminating());
}

TEST(InterruptWatchTest, ADeepCallFinishesWhileTheWatchAsksAgainAndAgain) {
  RunsDeepWhileAskedAgainAndAgain(0);
}

TEST(InterruptWatchTest, ADeepCallUnderACpuBudgetFinishesWhileTheWatchAsksAgainAndAgain) {
  RunsDeepWhileAskedAgainAndAgain(int64_t{1'000'000'000});
}

// Once the entry that was asked returns, its hook goes: a runtime with no
// limit runs hook-free again.
TEST(InterruptWatchTest, TheWatchHookGoesWhenTheEntryReturns) {
  Poll poll;
  auto rt = InterruptibleHost(&poll);
  LuaHost* host = rt->get();
  lua_State* L = host->main();
  const std::string out = RunLua(host, R"(
    local t0, n = os.clock(), 0
    while os.clock() - t0 < 0.4 do n = n + 1 end
    return n > 0)");
  EXPECT_EQ(out, "ok:true");
  EXPECT_GE(poll.asked.load(), 1);
  EXPECT_EQ(lua_gethookmask(L), 0);
}

}  // namespace
}  // namespace lua_tasks
