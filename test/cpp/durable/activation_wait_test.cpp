// SPDX-License-Identifier: MIT
// Tests for a dormant task read asynchronously: a Lua call that names it waits for its restore, then finds it live.
#include <string>

#include "durable_fixture.hpp"

namespace lua_tasks {
namespace {

constexpr const char* kSource = R"(
  function waiter() return coroutine.yield("INDEFINITELY") end
  function poke(id) local ok, why = tasks.resume(id, "woken"); got = ok or why end
  function join(id) joined = tasks.wait(id) end
)";

class ActivationWaitTest : public DurableTest {
 protected:
  std::unique_ptr<Life> Reopen(const std::string& id) {
    auto life = Open(kSource);
    Replayer& r = life->rt.scheduler->EnsureReplayer();
    r.set_async_reads(true);
    r.dormant().Add(id, {WaitKind::kIndefinitely, 0});
    r.dormant().Seal();
    return life;
  }
  void Start(Life* life, const char* entry, const std::string& arg) {
    Run(life, std::string("tasks.start(") + entry + ", '" + arg + "')");
  }
  std::string Global(Life* life, const char* name) {
    lua_State* L = life->rt.host->main();
    lua_getglobal(L, name);
    std::string v = lua_isnil(L, -1) ? "nil" : luaL_tolstring(L, -1, nullptr);
    lua_settop(L, 0);
    return v;
  }
};

TEST_F(ActivationWaitTest, ALuaResumeOfATaskBeingReadWaitsForItsRestoreThenResumesIt) {
  std::string id;
  {
    auto first = Open(kSource);
    id = StartNew(first.get(), "waiter");
  }
  auto life = Reopen(id);
  Start(life.get(), "poke", id);
  Start(life.get(), "join", id);
  Settle(life.get());
  // Both wait for the read; the embedder was asked to read it, once.
  EXPECT_EQ(life->hooks.activated, std::vector<std::string>{id});
  EXPECT_EQ(Global(life.get(), "got"), "nil");
  Replayer* r = life->rt.scheduler->replayer();
  ASSERT_NE(r->activations().Find(id), nullptr);
  EXPECT_EQ(r->activations().Find(id)->waiters.size(), 2u);
  EXPECT_FALSE(r->dormant().Contains(id));

  Restore(life.get(), id, "waiter");  // the read landed: it replays to its wait
  r->Activated(id);
  Settle(life.get());
  EXPECT_EQ(Global(life.get(), "got"), "true");
  EXPECT_EQ(Global(life.get(), "joined"), "woken");
  EXPECT_TRUE(r->activations().empty());
}

TEST_F(ActivationWaitTest, ACallWaitingForARestoreThatFailsFindsNoTask) {
  auto life = Reopen("t-gone");
  Start(life.get(), "poke", "t-gone");
  Settle(life.get());
  EXPECT_EQ(Global(life.get(), "got"), "nil");
  life->rt.scheduler->replayer()->Activated("t-gone");  // it could not be restored
  Settle(life.get());
  EXPECT_EQ(Global(life.get(), "got"), "no such task (unknown or finished)");
}

}  // namespace
}  // namespace lua_tasks
