// SPDX-License-Identifier: MIT
// Tests for JournalRestore: records grouped per task, in order, each taken once.
#include "core/durable/journal_restore.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace lua_tasks {
namespace {

using Strings = std::vector<std::string>;

TEST(JournalRestoreTest, GroupsEachTasksJournalAndInboxInKeyOrder) {
  JournalRestore r;
  r.Add(2, "a/0000000000", "a0");
  r.Add(2, "a/0000000001", "a1");
  r.Add(2, "b/0000000000", "b0");
  r.Add(1, "a/0000000002", "ignored: tasks.store");
  r.Add(3, "a/0000000005", "m5");
  r.Add(3, "a/0000000007", "m7");
  r.Add(3, "c/0000000000", "inbox of a task with no journal");
  EXPECT_EQ(r.ids(), (Strings{"a", "b"}));
  EXPECT_EQ(r.records(), 6u);
  ASSERT_NE(r.First("a"), nullptr);
  EXPECT_EQ(*r.First("a"), "a0");
  EXPECT_EQ(r.First("c"), nullptr);
  EXPECT_EQ(r.TakeJournal("a"), (Strings{"a0", "a1"}));
  EXPECT_TRUE(r.TakeJournal("a").empty());  // taken once
  JournalRestore::Inbox inbox = r.TakeInbox("a");
  EXPECT_EQ(inbox.keys, (Strings{"a/0000000005", "a/0000000007"}));
  EXPECT_EQ(inbox.records, (Strings{"m5", "m7"}));
  EXPECT_TRUE(r.TakeInbox("b").keys.empty());
  EXPECT_TRUE(r.TakeJournal("missing").empty());
}

TEST(JournalRestoreTest, AnIdMayHoldSlashesAndAnInboxMayComeFirst) {
  JournalRestore r;
  r.Add(3, "x/y/0000000003", "m");
  r.Add(2, "x/y/0000000000", "start");
  r.Add(2, "x/0000000000", "other");
  EXPECT_EQ(r.ids(), (Strings{"x/y", "x"}));
  EXPECT_EQ(r.TakeInbox("x/y").records, (Strings{"m"}));
  EXPECT_EQ(r.TakeJournal("x"), (Strings{"other"}));
}

}  // namespace
}  // namespace lua_tasks
