// SPDX-License-Identifier: MIT
// Tests for DurableStart: a new task's start record made, a restored task's records checked and read back.
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <lua.hpp>

#include "core/durable/durable_record.hpp"
#include "core/durable/durable_start.hpp"

namespace lua_tasks {
namespace {

class DurableStartTest : public ::testing::Test {
 protected:
  void SetUp() override { L = luaL_newstate(); }
  void TearDown() override { lua_close(L); }
  lua_State* L = nullptr;
};

TEST_F(DurableStartTest, ANewStartRestoresWithItsEntryKeyLabelAndArguments) {
  lua_pushinteger(L, 7);
  lua_pushliteral(L, "x");
  DurableStart made;
  std::string error;
  ASSERT_TRUE(NewStart(L, "main", std::string("k1"), std::string("job"), 2, &made, &error)) << error;
  EXPECT_EQ(lua_gettop(L), 2);  // the arguments stay
  lua_settop(L, 0);
  EXPECT_TRUE(made.id.empty());
  EXPECT_TRUE(made.records.empty());
  EXPECT_EQ(made.entry, "main");
  EXPECT_EQ(made.key, "k1");
  EXPECT_EQ(made.label, "job");

  DurableStart back;
  const int n = RestoreStart(L, "t1", {SealRecord(RecordKind::kStart, made.start)}, &back, &error);
  ASSERT_EQ(n, 2) << error;
  EXPECT_EQ(lua_tointeger(L, 1), 7);
  EXPECT_STREQ(lua_tostring(L, 2), "x");
  EXPECT_EQ(back.id, "t1");
  EXPECT_EQ(back.entry, "main");
  EXPECT_EQ(back.key, "k1");
  EXPECT_EQ(back.label, "job");
  ASSERT_EQ(back.records.size(), 1u);
  EXPECT_EQ(back.records[0][0], static_cast<char>(RecordKind::kStart));  // unsealed
}

TEST_F(DurableStartTest, ANewStartRefusesAnArgumentThatCannotPersist) {
  lua_pushcfunction(L, [](lua_State*) { return 0; });
  DurableStart made;
  std::string error;
  EXPECT_FALSE(NewStart(L, "main", std::nullopt, std::nullopt, 1, &made, &error));
  EXPECT_FALSE(error.empty());
}

// Each row: a restored journal that cannot start, and what the error says.
TEST_F(DurableStartTest, ARestoredJournalThatCannotStartSaysWhy) {
  std::string damaged = SealRecord(RecordKind::kStart, "payload");
  damaged[3] ^= 1;
  const struct {
    std::vector<std::string> records;
    std::string error;
  } rows[] = {
      {{SealRecord(RecordKind::kStep, "s"), damaged},
       "Record 1 of the journal of durable task t1 is damaged (its checksum does not match)."},
      {{}, "A durable task's journal does not begin with its start record."},
      {{SealRecord(RecordKind::kStep, "s")}, "A durable task's journal does not begin with its start record."},
      {{SealRecord(RecordKind::kStart, "not a values payload")}, "A durable task's start record does not read: "},
  };
  for (const auto& row : rows) {
    DurableStart out;
    std::string error;
    EXPECT_EQ(RestoreStart(L, "t1", row.records, &out, &error), -1);
    EXPECT_EQ(error.substr(0, row.error.size()), row.error);
  }
}

}  // namespace
}  // namespace lua_tasks
