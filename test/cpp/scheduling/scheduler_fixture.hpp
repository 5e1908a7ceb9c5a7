// SPDX-License-Identifier: MIT
// The Scheduler tests' fixture: a runtime on a fake clock whose hooks record ends, COMMITs and contexts.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/host/lua_runtime.hpp"
#include "core/scheduling/scheduler.hpp"
#include "test_clocks.hpp"
#include "test_hosts.hpp"

// A named namespace, not an unnamed one: every test file that includes this
// must see the same fixture class (GoogleTest refuses two of one name).
namespace lua_tasks::scheduler_testing {

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

// Settles the oldest COMMIT in flight as written: (true, nil) onto the task.
inline void Written(Scheduler* sched, Recorder* rec) {
  ASSERT_FALSE(rec->committing.empty());
  Task* t = sched->Find(rec->committing.front());
  rec->committing.erase(rec->committing.begin());
  ASSERT_NE(t, nullptr);
  lua_pushboolean(t->co, 1);
  lua_pushnil(t->co);
  sched->FinishCommit(t, 2);
}

}  // namespace lua_tasks::scheduler_testing
