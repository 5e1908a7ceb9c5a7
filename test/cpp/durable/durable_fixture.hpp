// SPDX-License-Identifier: MIT
// The durable tests' fixture: runtimes on a fake clock whose COMMITs and journals go to an in-memory store.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "core/durable/durable_journal.hpp"
#include "core/durable/durable_record.hpp"
#include "core/durable/replayer.hpp"
#include "core/host/lua_runtime.hpp"
#include "core/scheduling/scheduler.hpp"
#include "test_clocks.hpp"
#include "test_hosts.hpp"

namespace lua_tasks {
namespace {

constexpr int64_t kSec = 1'000'000'000;

// The hooks: every COMMIT (a durable wait's too) is written at once.
class Hooks final : public SchedulerHooks {
 public:
  void OnTaskEnd(Task& task, lua_State* co, const TaskEnding& end) override {
    std::string v = end.kind == TaskEnd::kDone ? "done" : end.kind == TaskEnd::kCancelled ? "cancelled" : "failed";
    if (end.kind == TaskEnd::kFailed) v += std::string(":") + luaL_tolstring(co, -1, nullptr), lua_pop(co, 1);
    ends.push_back(v);
  }
  void OnScheduleChange() override {}
  void OnActivate(const std::string& id) override { activated.push_back(id); }
  void OnCommit(Task& task) override {
    if (++commits == fail_at) {
      lua_pushboolean(task.co, 0);
      lua_pushliteral(task.co, "disk on fire");
    } else {
      lua_pushboolean(task.co, 1);
      lua_pushnil(task.co);
    }
    sched->FinishCommit(&task, 2);
  }
  std::vector<std::string> ends;
  std::vector<std::string> activated;  // ids OnActivate was asked for
  Scheduler* sched = nullptr;
  int commits = 0;  // COMMITs asked for (a durable wait's write too)
  int fail_at = 0;  // the COMMIT of that count fails with "disk on fire"
};

// One runtime's life over a store kept in a map, as a restart sees it.
class DurableTest : public ::testing::Test {
 protected:
  struct Life {
    LuaRuntime rt;
    Hooks hooks;
  };
  std::unique_ptr<Life> Open(const std::string& source, const Clock* on = nullptr) {
    auto life = std::make_unique<Life>();
    LuaHostOptions o;
    std::string error;
    EXPECT_TRUE(life->rt.Assemble(o, on != nullptr ? on : &clock, &life->hooks, &error)) << error;
    life->hooks.sched = life->rt.scheduler.get();
    life->rt.scheduler->EnsureReplayer().set_ok(true);
    life->rt.scheduler->set_has_store(true);
    Run(life.get(), "log = {} function note(s) log[#log + 1] = s end " + source);
    return life;
  }
  void Run(Life* life, const std::string& src) {
    LuaHost* host = life->rt.host.get();
    lua_State* L = host->main();
    ASSERT_EQ(host->Load(L, src, "=test"), LUA_OK) << lua_tostring(L, -1);
    LuaHost::Entry e(host, L);
    ASSERT_EQ(host->PCall(L, 0, 0), LUA_OK) << host->last_message();
  }
  std::string Log(Life* life) { return GlobalLog(life->rt.host->main()); }
  // Starts the durable task `entry` (no arguments) and returns its id.
  std::string StartNew(Life* life, const char* entry) {
    lua_State* L = life->rt.host->main();
    Scheduler* s = life->rt.scheduler.get();
    lua_pushstring(L, entry);
    lua_pushnil(L);
    std::string start, error;
    {
      LuaHost::HostSection section(life->rt.host.get(), L);
      EXPECT_TRUE(EncodeValues(L, 2, &start, &error)) << error;
    }
    lua_pop(L, 2);
    DurableStart durable{"", start, {}, entry, std::nullopt, std::nullopt};
    lua_getglobal(L, entry);
    const uint64_t key = s->Start(L, 0, true, nullptr, &durable);
    Flush(life);
    return s->IdOf(key);
  }
  // Restores task `id` from the store, as Runtime.open does.
  uint64_t Restore(Life* life, const std::string& id, const char* entry) {
    std::vector<std::string> records;
    for (const auto& [k, v] : store) {
      if (k.rfind(id + "/", 0) != 0) continue;
      std::string r = v;
      EXPECT_TRUE(UnsealRecord(&r));
      records.push_back(r);
    }
    Scheduler* s = life->rt.scheduler.get();
    DurableStart durable{id, "", records, entry, std::nullopt, std::nullopt};
    lua_State* L = life->rt.host->main();
    lua_getglobal(L, entry);
    const uint64_t key = s->Start(L, 0, true, nullptr, &durable);
    Flush(life);
    return key;
  }
  void Flush(Life* life) {
    for (StoreWrite& w : life->rt.scheduler->replayer()->TakeWrites()) {
      if (w.space != kJournalSpace) continue;
      written.push_back(w.key);
      if (w.value) {
        store[w.key] = *w.value;
      } else {
        store.erase(w.key);
      }
    }
  }
  // Runs what is ready until nothing is: a committer goes on through the ready queue.
  void Settle(Life* life) {
    for (int i = 0; i < 20; ++i) Advance(life, 0);
  }
  void Advance(Life* life, int64_t ns) {
    clock.Advance(ns);
    life->rt.scheduler->RunTimers();
    life->rt.scheduler->RunImmediate();
    Flush(life);
  }
  FakeClock clock;
  std::map<std::string, std::string> store;
  std::vector<std::string> written;  // journal keys in the order they were written
};

}  // namespace
}  // namespace lua_tasks
