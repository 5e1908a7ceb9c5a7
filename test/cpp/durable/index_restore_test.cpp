// SPDX-License-Identifier: MIT
// Tests for the durable tasks' index: its entries, which tasks stay dormant at open, and the restore by the index.
#include "core/durable/index_restore.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../store_test_dir.hpp"

namespace lua_tasks {
namespace {

constexpr int64_t kSec = 1'000'000'000;
constexpr int64_t kNow = 1'800'000'000 * kSec;

IndexEntry Waiting(WaitKind kind, int64_t deadline, std::optional<std::string> key = std::nullopt) {
  IndexEntry e;
  e.waiting = true;
  e.wait.kind = kind;
  e.wait.wall_start = kNow - kSec;
  e.wait.wall_deadline = deadline;
  e.key = std::move(key);
  return e;
}

std::string PayloadOf(std::string sealed) {
  RecordKind kind;
  std::string_view payload;
  EXPECT_TRUE(OpenRecord(&sealed, &kind, &payload));
  EXPECT_EQ(kind, RecordKind::kIndex);
  return std::string(payload);
}

TEST(IndexEntryTest, RunningAndWaitingEntriesReadBackWithTheirKeys) {
  IndexEntry running;
  running.key = std::string("quest:\0:7", 9);  // any bytes
  IndexEntry back;
  ASSERT_TRUE(DecodeIndexEntry(PayloadOf(SealIndexEntry(running)), &back));
  EXPECT_FALSE(back.waiting);
  EXPECT_EQ(back.key, running.key);

  const IndexEntry waiting = Waiting(WaitKind::kUntilTime, kNow + 60 * kSec);
  ASSERT_TRUE(DecodeIndexEntry(PayloadOf(SealIndexEntry(waiting)), &back));
  EXPECT_TRUE(back.waiting);
  EXPECT_EQ(back.wait.kind, WaitKind::kUntilTime);
  EXPECT_EQ(back.wait.wall_deadline, kNow + 60 * kSec);
  EXPECT_EQ(back.key, std::nullopt);
}

TEST(IndexEntryTest, APayloadThatIsNotAnEntryIsRefused) {
  IndexEntry e;
  EXPECT_FALSE(DecodeIndexEntry("", &e));
  EXPECT_FALSE(DecodeIndexEntry("Q\0", &e));
  EXPECT_FALSE(DecodeIndexEntry(std::string("W\0", 2), &e));       // a wait too short
  EXPECT_FALSE(DecodeIndexEntry(std::string("R\0extra", 7), &e));  // bytes after an unkeyed entry
  EXPECT_FALSE(DecodeIndexEntry(std::string("R\x02", 2), &e));
}

TEST(IndexRestoreTest, WhatStaysDormant) {
  IndexEntry running;
  EXPECT_FALSE(StaysDormant(running, kNow, false));
  EXPECT_TRUE(StaysDormant(Waiting(WaitKind::kIndefinitely, 0), kNow, false));
  EXPECT_FALSE(StaysDormant(Waiting(WaitKind::kIndefinitely, 0), kNow, true));  // a message waits for it
  EXPECT_TRUE(StaysDormant(Waiting(WaitKind::kReceive, 0), kNow, false));
  EXPECT_FALSE(StaysDormant(Waiting(WaitKind::kReceive, 0), kNow, true));
  EXPECT_TRUE(StaysDormant(Waiting(WaitKind::kFor, kNow + 2 * kSec), kNow, false));
  // Within DormantTasks::kLeadNs, or past: it runs now.
  EXPECT_FALSE(StaysDormant(Waiting(WaitKind::kFor, kNow + kSec), kNow, false));
  EXPECT_FALSE(StaysDormant(Waiting(WaitKind::kUntilNext, kNow - kSec), kNow, false));
  EXPECT_FALSE(StaysDormant(Waiting(WaitKind::kFor, 0), kNow, false));  // a FOR without a deadline does not read
  EXPECT_FALSE(StaysDormant(Waiting(WaitKind::kJoin, 0), kNow, false));
  EXPECT_FALSE(StaysDormant(Waiting(WaitKind::kImmediate, 0), kNow, false));
}

TEST(DormantTasksTest, DueTasksComeOutByDeadlineAndTakenOnesNever) {
  DormantTasks d;
  d.AddAll({{"late", {WaitKind::kFor, kNow + 30 * kSec}},
            {"early", {WaitKind::kFor, kNow + 10 * kSec}},
            {"never", {WaitKind::kIndefinitely, 0}},
            {"taken", {WaitKind::kFor, kNow + 5 * kSec}}});
  EXPECT_EQ(d.size(), 4u);
  ASSERT_TRUE(d.HasWakes());
  EXPECT_EQ(d.NextWake(), kNow + 5 * kSec - DormantTasks::kLeadNs);
  EXPECT_TRUE(d.Take("taken"));
  EXPECT_FALSE(d.Take("taken"));
  EXPECT_EQ(d.PopDue(kNow), std::nullopt);
  EXPECT_EQ(d.PopDue(kNow + 9 * kSec), "early");  // its lead: a second before its deadline
  EXPECT_EQ(d.PopDue(kNow + 9 * kSec), std::nullopt);
  EXPECT_EQ(d.PopDue(kNow + 60 * kSec), "late");
  EXPECT_FALSE(d.HasWakes());
  ASSERT_NE(d.Find("never"), nullptr);
  EXPECT_EQ(d.Find("never")->kind, WaitKind::kIndefinitely);
  EXPECT_TRUE(d.Contains("early"));  // due, but dormant until its activation takes it
}

TEST(DormantTasksTest, ATaskTakenBeforeItsDeadlineLeavesNoWakeToKeepTheLoop) {
  DormantTasks d;
  d.AddAll({{"hour", {WaitKind::kFor, kNow + 3600 * kSec}}, {"never", {WaitKind::kIndefinitely, 0}}});
  EXPECT_TRUE(d.HasWakes());
  EXPECT_TRUE(d.Take("hour"));  // resumed long before its deadline
  EXPECT_FALSE(d.HasWakes());   // a process with nothing else to do may exit
  EXPECT_EQ(d.PopDue(kNow + 7200 * kSec), std::nullopt);
  EXPECT_EQ(d.size(), 1u);
  EXPECT_TRUE(d.Take("never"));
  EXPECT_TRUE(d.empty());
}

class RestoreFromIndexTest : public ::testing::Test {
 protected:
  void SetUp() override { db_ = std::make_unique<StoreDb>(dir_.Db(), StoreDb::Access::kReadWrite); }
  void Put(int space, const std::string& key, const std::string& value) {
    StoreBatch b;
    b.name = "n";
    b.writes.push_back({space, key, value});
    db_->Begin();
    db_->Apply(b);
    db_->Commit();
  }
  void Task(const std::string& id, const IndexEntry& e, int records) {
    Put(kIndexSpace, id, SealIndexEntry(e));
    for (int i = 0; i < records; ++i) Put(kJournalSpace, RecordKey(id, i), SealRecord(RecordKind::kStep, "x"));
  }
  TempDir dir_;
  std::unique_ptr<StoreDb> db_;
};

TEST_F(RestoreFromIndexTest, ANameWithoutItsMarkIsReadWhole) {
  Task("t1", IndexEntry{}, 2);
  JournalRestore restore;
  DormantTasks dormant;
  const IndexRestore r = RestoreFromIndex(*db_, "n", "", kNow, &restore, &dormant);
  EXPECT_FALSE(r.complete);
  EXPECT_EQ(restore.records(), 0u);
  EXPECT_TRUE(dormant.empty());
}

TEST_F(RestoreFromIndexTest, WhatRunsNowIsReadAndTheRestStaysDormant) {
  Put(kIndexSpace, kIndexMarkKey, SealRecord(RecordKind::kIndex, "mark"));
  Task("run", IndexEntry{}, 3);
  Task("far", Waiting(WaitKind::kFor, kNow + 3600 * kSec, "k1"), 2);
  Task("near", Waiting(WaitKind::kFor, kNow + kSec / 2), 2);
  Task("mail", Waiting(WaitKind::kIndefinitely, 0), 2);
  Put(kInboxSpace, RecordKey("mail", 0), SealRecord(RecordKind::kMessage, "m"));
  Put(kIndexSpace, "ended", SealRecord(RecordKind::kEnd, "e"));
  Task("mine-1", IndexEntry{}, 1);  // a task of this run: not restored

  JournalRestore restore;
  DormantTasks dormant;
  const IndexRestore r = RestoreFromIndex(*db_, "n", "mine-", kNow, &restore, &dormant);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.dormant, 1u);
  EXPECT_TRUE(dormant.Contains("far"));
  ASSERT_EQ(r.keys.size(), 1u);
  EXPECT_EQ(r.keys[0], std::make_pair(std::string("far"), std::string("k1")));
  std::vector<std::string> ids = restore.ids();
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::string>{"ended", "mail", "near", "run"}));
  EXPECT_EQ(restore.TakeJournal("run").size(), 3u);
  EXPECT_EQ(restore.TakeInbox("mail").keys.size(), 1u);
  ASSERT_NE(restore.First("ended"), nullptr);  // its end record, as record 0
  std::string end = *restore.First("ended");
  RecordKind kind;
  std::string_view payload;
  ASSERT_TRUE(OpenRecord(&end, &kind, &payload));
  EXPECT_EQ(kind, RecordKind::kEnd);

  // A task's journal and inbox, for its activation.
  JournalRestore one;
  RestoreTask(*db_, "n", "mail", true, &one);
  EXPECT_EQ(one.ids(), std::vector<std::string>{"mail"});
  EXPECT_EQ(one.TakeInbox("mail").keys.size(), 1u);
}

}  // namespace
}  // namespace lua_tasks
