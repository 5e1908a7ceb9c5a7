// SPDX-License-Identifier: MIT
// Tests for the Replayer's inbox: a restored task's messages put back in its mailbox, a damaged one refused.
#include <string>

#include <gtest/gtest.h>

#include "durable_fixture.hpp"

namespace lua_tasks {
namespace {

std::string Message(lua_State* L, const char* text) {
  lua_pushstring(L, text);
  std::string payload, error;
  EXPECT_TRUE(EncodeValues(L, 1, &payload, &error)) << error;
  lua_pop(L, 1);
  return SealRecord(RecordKind::kMessage, payload);
}

class ReplayerInboxTest : public DurableTest {};

// Each row: the inbox's second message, and the error that stops the
// restore there (the first message is restored all the same).
TEST_F(ReplayerInboxTest, ARestoredInboxGoesBackInOrderAndStopsAtAMessageThatDoesNotRead) {
  const struct {
    const char* name;
    bool damage;
    std::string second;
    std::string error;
  } rows[] = {
      {"a damaged record", true, "", " of a durable task's inbox is damaged."},
      {"a record of another kind", false, SealRecord(RecordKind::kStep, "s"), " of a durable task's inbox is damaged."},
      {"a payload that does not read", false, SealRecord(RecordKind::kMessage, "not values"), " does not read: "},
      {"none", false, "", ""},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.name);
    auto life = Open("function r() note(tasks.receive()) note(tasks.receive()) end");
    const std::string id = StartNew(life.get(), "r");
    Scheduler* s = life->rt.scheduler.get();
    uint64_t key = 0;
    ASSERT_TRUE(s->ParseId(id, &key));
    lua_State* L = life->rt.host->main();
    const int top = lua_gettop(L);
    JournalRestore::Inbox inbox;
    inbox.keys = {RecordKey(id, 0), RecordKey(id, 1)};
    std::string second = row.second.empty() ? Message(L, "b") : row.second;
    if (row.damage) second[3] ^= 1;
    inbox.records = {Message(L, "a"), second};
    std::string error;
    bool ok;
    {
      LuaHost::HostSection section(life->rt.host.get(), L);
      ok = s->replayer()->RestoreInbox(key, inbox, L, &error);
    }
    Settle(life.get());
    if (row.error.empty()) {
      EXPECT_TRUE(ok) << error;
      EXPECT_EQ(Log(life.get()), "a,b");
    } else {
      EXPECT_FALSE(ok);
      EXPECT_EQ(error.rfind("The message " + RecordKey(id, 1) + row.error, 0), 0u) << error;
      EXPECT_EQ(Log(life.get()), "a");
    }
    EXPECT_EQ(lua_gettop(L), top);  // L is scratch: left as it was
  }
}

}  // namespace
}  // namespace lua_tasks
