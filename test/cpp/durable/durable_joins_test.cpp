// SPDX-License-Identifier: MIT
// Durable children and joins (docs/durable.md#children): ids journaled before starts, joins answered from end records.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "durable/durable_fixture.hpp"

namespace lua_tasks {
namespace {

// A suite of its own: DurableTest is this file's copy of the fixture.
class DurableJoinTest : public DurableTest {};

// Durable children (docs/durable.md#children): the parent's record of a
// child's id goes out before the child's start record, in the same write.
TEST_F(DurableJoinTest, AChildsIdIsJournaledBeforeItsStartAndAReplayStartsNoSecondChild) {
  const char* src = R"(
    function kid() coroutine.yield("INDEFINITELY") return 7 end
    function parent()
      local id = tasks.start(kid)
      note(id)
      return tasks.wait(id)
    end)";
  std::string pid, cid;
  {
    auto first = Open(src);
    pid = StartNew(first.get(), "parent");
    cid = Log(first.get());
    ASSERT_EQ(cid.size(), Scheduler::kIdLength);
    const auto at = [&](const std::string& key) { return std::find(written.begin(), written.end(), key); };
    ASSERT_NE(at(cid + "/0000000000"), written.end());
    EXPECT_LT(at(pid + "/0000000001"), at(cid + "/0000000000"));  // the parent's record first
    EXPECT_EQ(first->rt.scheduler->replayer()->count(), 2u);
  }
  auto second = Open(src);
  const uint64_t child = Restore(second.get(), cid, "kid");
  const uint64_t parent = Restore(second.get(), pid, "parent");
  EXPECT_EQ(second->rt.scheduler->replayer()->count(), 2u);  // the replay started nothing
  EXPECT_EQ(Log(second.get()), cid);                         // the replay's tasks.start answered the recorded id
  ASSERT_EQ(second->rt.scheduler->Resume(child, second->rt.host->main(), 0), Scheduler::ResumeResult::kResumed);
  Settle(second.get());
  EXPECT_EQ(second->rt.scheduler->Find(parent), nullptr);
  EXPECT_EQ(second->hooks.ends, (std::vector<std::string>{"done", "done"}));
}

TEST_F(DurableJoinTest, AJoinAnswersFromARetainedEndRecordAndAtOnceForATaskThatIsGone) {
  const char* src = R"(
    function kid() return "fine" end
    function parent()
      local id = tasks.start(kid)
      local v, m = tasks.wait("t" .. string.rep("0", 26) .. "-" .. string.rep("0", 13))
      note(tostring(v) .. " " .. m)
      coroutine.yield("INDEFINITELY")
      note(tasks.wait(id))
    end)";
  std::string pid;
  {
    auto first = Open(src);
    pid = StartNew(first.get(), "parent");
  }
  auto second = Open(src);
  // The kid's end record, as Runtime.open hands it over.
  for (const auto& [k, v] : store) {
    if (k.rfind(pid, 0) == 0) continue;
    std::string rec = v;
    RecordKind kind;
    std::string_view payload;
    ASSERT_TRUE(OpenRecord(&rec, &kind, &payload));
    ASSERT_EQ(kind, RecordKind::kEnd);
    second->rt.scheduler->replayer()->KeepEnd(k.substr(0, Scheduler::kIdLength), std::string(payload));
  }
  const uint64_t parent = Restore(second.get(), pid, "parent");
  ASSERT_EQ(second->rt.scheduler->Resume(parent, second->rt.host->main(), 0), Scheduler::ResumeResult::kResumed);
  Settle(second.get());
  // The unknown id's answer, replayed; the kid's first result, from its end record.
  EXPECT_EQ(Log(second.get()), "nil no such task (unknown, or finished too long ago),fine");
  EXPECT_EQ(second->hooks.ends, std::vector<std::string>{"done"});
}

// A joined child's error that cannot persist (a userdata here; a JS error
// object in the addon) fails no one: the parent gets it as it is, the
// journal keeps its message, and a replay raises that.
TEST_F(DurableJoinTest, AJoinedChildsErrorThatCannotPersistIsJournaledAsItsMessage) {
  const char* src = R"(
    function kid() coroutine.yield("INDEFINITELY") error(userdata()) end
    function parent()
      local id = tasks.start(kid)
      note(id)
      local ok, e = pcall(tasks.wait, id)
      note(tostring(ok) .. " " .. type(e))
      coroutine.yield("INDEFINITELY")
    end)";
  const auto withUserdata = [](Life* life) {
    lua_State* L = life->rt.host->main();
    lua_pushcfunction(L, [](lua_State* S) {
      lua_newuserdatauv(S, 1, 0);
      return 1;
    });
    lua_setglobal(L, "userdata");
  };
  std::string pid, cid;
  {
    auto first = Open(src);
    withUserdata(first.get());
    pid = StartNew(first.get(), "parent");
    cid = Log(first.get());
    uint64_t key = 0;
    ASSERT_TRUE(first->rt.scheduler->ParseId(cid, &key));
    ASSERT_EQ(first->rt.scheduler->Resume(key, first->rt.host->main(), 0), Scheduler::ResumeResult::kResumed);
    Settle(first.get());
    EXPECT_EQ(Log(first.get()), cid + ",false userdata");
  }
  auto second = Open(src);
  withUserdata(second.get());
  Restore(second.get(), pid, "parent");
  Settle(second.get());
  EXPECT_EQ(Log(second.get()), cid + ",false string");
  EXPECT_TRUE(second->hooks.ends.empty());  // the parent waits again: it did not fail
}

}  // namespace
}  // namespace lua_tasks
