// SPDX-License-Identifier: MIT
// Tests for journal histories: each stored record read for a person, through the record format's own decoders.
#include <string>

#include <gtest/gtest.h>
#include <lua.hpp>

#include "core/durable/journal_history.hpp"

namespace lua_tasks {
namespace {

class JournalHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override { L = luaL_newstate(); }
  void TearDown() override { lua_close(L); }
  // The values payload of what `exprs` evaluate to.
  std::string Values(const std::string& exprs) {
    EXPECT_EQ(luaL_dostring(L, ("return " + exprs).c_str()), LUA_OK);
    std::string out, error;
    EXPECT_TRUE(EncodeValues(L, lua_gettop(L), &out, &error)) << error;
    lua_settop(L, 0);
    return out;
  }
  HistoryRecord Read(uint64_t seq, const std::string& sealed) {
    HistoryRecord r = ReadHistoryRecord(L, RecordKey("t1", seq), sealed, CodecGuard{});
    EXPECT_EQ(lua_gettop(L), 0);
    return r;
  }
  lua_State* L = nullptr;
};

TEST_F(JournalHistoryTest, EachKindSaysWhatItHolds) {
  const HistoryRecord start = Read(0, SealRecord(RecordKind::kStart, Values("'quest', 'k1', 'ann', 5")));
  ASSERT_TRUE(start.ok) << start.error;
  EXPECT_EQ(start.seq, 0u);
  EXPECT_EQ(*start.name, "quest");
  EXPECT_EQ(*start.key, "k1");
  EXPECT_EQ(start.values, (std::vector<std::string>{"\"ann\"", "5"}));

  YieldRecord y;
  y.kind = WaitKind::kFor;
  y.value = 3'600'000'000'000;
  y.wall_start = 1'000'000'000'000'000'000;
  y.wall_deadline = y.wall_start + y.value;
  const HistoryRecord wait = Read(7, SealRecord(RecordKind::kYield, EncodeYield(y)));
  ASSERT_TRUE(wait.ok);
  EXPECT_EQ(wait.seq, 7u);
  EXPECT_TRUE(wait.has_yield);
  EXPECT_EQ(wait.yield.wall_deadline, y.wall_deadline);
  EXPECT_EQ(wait.what, "a yield (FOR)");

  const HistoryRecord call =
      Read(2, SealRecord(RecordKind::kCall, Values("false, 'no gold'"), std::string_view("grant")));
  ASSERT_TRUE(call.ok);
  EXPECT_EQ(*call.name, "grant");
  EXPECT_EQ(call.what, "a JS call to grant");
  EXPECT_EQ(call.values, (std::vector<std::string>{"false", "\"no gold\""}));

  const HistoryRecord step = Read(3, SealRecord(RecordKind::kStep, Values("{1, 2}"), std::string_view("pay")));
  EXPECT_EQ(step.what, "tasks.step \"pay\"");
  EXPECT_EQ(step.values, (std::vector<std::string>{"{1, 2}"}));

  const HistoryRecord failed =
      Read(4, SealRecord(RecordKind::kCommitFailed, EncodeCommitFailed(2, Values("false, 'disk on fire'"))));
  ASSERT_TRUE(failed.ok);
  EXPECT_EQ(failed.landed, 2u);
  EXPECT_EQ(failed.values, (std::vector<std::string>{"false", "\"disk on fire\""}));

  const HistoryRecord patch = Read(5, SealRecord(RecordKind::kPatch, "double-reward"));
  EXPECT_EQ(*patch.name, "double-reward");
  const HistoryRecord message = Read(6, SealRecord(RecordKind::kMessage, Values("'hello'")));
  EXPECT_EQ(message.values, (std::vector<std::string>{"\"hello\""}));
}

TEST_F(JournalHistoryTest, ADamagedRecordOrPayloadSaysSoAndLeavesTheStackAsItWas) {
  std::string damaged = SealRecord(RecordKind::kIn, Values("1"));
  damaged[2] ^= 1;
  const HistoryRecord r = Read(1, damaged);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("checksum"), std::string::npos);
  const HistoryRecord bad = Read(1, SealRecord(RecordKind::kIn, "\x01garbage"));
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.error.find("do not read"), std::string::npos) << bad.error;
  const HistoryRecord yield = Read(1, SealRecord(RecordKind::kYield, "short"));
  EXPECT_FALSE(yield.ok);
}

}  // namespace
}  // namespace lua_tasks
