// SPDX-License-Identifier: MIT
// Tests for the durable tasks' index: its entries, which tasks stay dormant at open, and the restore by the index.
#include "core/durable/index_restore.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../store_test_dir.hpp"
#include "core/durable/activations.hpp"

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
  d.Add("late", {WaitKind::kFor, kNow + 30 * kSec});
  d.Add("early", {WaitKind::kFor, kNow + 10 * kSec});
  d.Add("never", {WaitKind::kIndefinitely, 0});
  d.Add("taken", {WaitKind::kFor, kNow + 5 * kSec});
  d.Add("early", {WaitKind::kFor, kNow + 1 * kSec});  // known already: keeps its first entry
  d.Seal();
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

TEST(DormantTasksTest, ManyTasksTakenOneByOneStayFoundAndDueInOrderThroughCompactions) {
  // 20,000 ids of the length Runtime's ids have: every second one has a
  // deadline (its index, in seconds); taking three of four compacts the
  // table several times, and the rest are found and come due in order.
  DormantTasks d;
  constexpr int kCount = 20000;
  auto id = [](int i) {
    std::string s = "t-0123456789abcdef0123456789abcdef-" + std::to_string(i);
    return s;
  };
  for (int i = 0; i < kCount; ++i) {
    d.Add(id(i), {i % 2 == 0 ? WaitKind::kFor : WaitKind::kIndefinitely, i % 2 == 0 ? kNow + i * kSec : 0});
  }
  d.Seal();
  EXPECT_EQ(d.size(), static_cast<size_t>(kCount));
  for (int i = 0; i < kCount; ++i) {
    if (i % 4 != 3) ASSERT_TRUE(d.Take(id(i))) << i;
  }
  EXPECT_EQ(d.size(), static_cast<size_t>(kCount / 4));
  for (int i = 0; i < kCount; ++i) {
    EXPECT_EQ(d.Contains(id(i)), i % 4 == 3) << i;
  }
  EXPECT_FALSE(d.HasWakes());  // the ones left (i % 4 == 3) are odd: none has a deadline
  size_t seen = 0;
  d.ForEach([&](std::string_view, const DormantTasks::Entry& e) {
    EXPECT_EQ(e.kind, WaitKind::kIndefinitely);
    ++seen;
  });
  EXPECT_EQ(seen, static_cast<size_t>(kCount / 4));
  DormantTasks w;
  for (int i = kCount; i-- > 0;) w.Add(id(i), {WaitKind::kFor, kNow + i * kSec});
  w.Seal();
  for (int i = 0; i < kCount; i += 2) ASSERT_TRUE(w.Take(id(i)));
  for (int i = 1; i < kCount; i += 2) {
    ASSERT_EQ(w.PopDue(kNow + (kCount + 1) * kSec), id(i));
    ASSERT_TRUE(w.Take(id(i)));
  }
  EXPECT_TRUE(w.empty());
}

TEST(DormantTasksTest, ATaskTakenBeforeItsDeadlineLeavesNoWakeToKeepTheLoop) {
  DormantTasks d;
  d.Add("hour", {WaitKind::kFor, kNow + 3600 * kSec});
  d.Add("never", {WaitKind::kIndefinitely, 0});
  d.Seal();
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

  EXPECT_TRUE(r.missing.empty());

  // A task's journal and inbox, for its activation.
  JournalRestore one;
  RestoreTask(*db_, "n", "mail", true, &one);
  EXPECT_EQ(one.ids(), std::vector<std::string>{"mail"});
  EXPECT_EQ(one.TakeInbox("mail").keys.size(), 1u);
}

// An entry whose task's journal is gone is reported with what was wrong:
// a sound entry names a lost journal; a damaged one (a record of another
// kind in its place, a checksum that fails) lost what it held.
TEST_F(RestoreFromIndexTest, AnEntryWithoutAJournalIsReportedSayingWhatWasWrong) {
  Put(kIndexSpace, kIndexMarkKey, SealRecord(RecordKind::kIndex, "mark"));
  Put(kIndexSpace, "gone", SealIndexEntry(IndexEntry{}));
  Put(kIndexSpace, "swapped", SealRecord(RecordKind::kStart, "s"));
  std::string flipped = SealRecord(RecordKind::kEnd, "e");
  flipped[flipped.size() / 2] ^= 1;
  Put(kIndexSpace, "flipped", flipped);
  Task("kept", IndexEntry{}, 2);
  Put(kIndexSpace, "kept-swapped", SealRecord(RecordKind::kStart, "s"));  // its journal is there: it says
  for (int i = 0; i < 2; ++i) Put(kJournalSpace, RecordKey("kept-swapped", i), SealRecord(RecordKind::kStep, "x"));

  JournalRestore restore;
  DormantTasks dormant;
  const IndexRestore r = RestoreFromIndex(*db_, "n", "", kNow, &restore, &dormant);
  std::vector<std::pair<std::string, std::string>> got;
  for (const IndexRestore::Missing& m : r.missing) got.emplace_back(m.id, m.why.substr(0, 40));
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::pair<std::string, std::string>>{
                     {"flipped", "its index entry does not read (its check"},
                     {"gone", "its index entry names a journal the stor"},
                     {"swapped", "its index entry is a start record, not a"},
                 }));
  EXPECT_EQ(restore.TakeJournal("kept").size(), 2u);
  EXPECT_EQ(restore.TakeJournal("kept-swapped").size(), 2u);
}

// A store's rows fed one at a time (lib/runtime's pages of PostgreSQL)
// come to what RestoreFromIndex reads from a StoreDb.
TEST_F(RestoreFromIndexTest, RowsFedOneByOneComeToWhatTheStoreDbReadGives) {
  Task("run", IndexEntry{}, 3);
  Task("far", Waiting(WaitKind::kFor, kNow + 3600 * kSec, "k1"), 2);
  Task("mail", Waiting(WaitKind::kIndefinitely, 0), 2);
  Put(kInboxSpace, RecordKey("mail", 0), SealRecord(RecordKind::kMessage, "m"));
  Put(kIndexSpace, "gone", SealIndexEntry(IndexEntry{}));

  JournalRestore restore;
  DormantTasks dormant;
  IndexReader reader("", kNow, &restore, &dormant);
  db_->Scan("n", kInboxSpace, kInboxSpace, [&](int, std::string_view k, std::string_view v) { reader.Inbox(k, v); });
  db_->Scan("n", kIndexSpace, kIndexSpace, [&](int, std::string_view k, std::string_view v) { reader.Entry(k, v); });
  std::vector<std::string> now = reader.now();
  std::sort(now.begin(), now.end());
  EXPECT_EQ(now, (std::vector<std::string>{"gone", "mail", "run"}));  // a message waits for "mail"
  for (const std::string& id : now) RestoreTask(*db_, "n", id, false, &restore);
  const IndexRestore r = reader.Finish();
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.dormant, 1u);
  EXPECT_TRUE(dormant.Contains("far"));
  ASSERT_EQ(r.keys.size(), 1u);
  ASSERT_EQ(r.missing.size(), 1u);
  EXPECT_EQ(r.missing[0].id, "gone");
  EXPECT_EQ(restore.TakeJournal("run").size(), 3u);
  EXPECT_EQ(restore.TakeInbox("mail").keys.size(), 1u);
}

TEST(ActivationsTest, ATaskIsBeingReadOnceAndItsWaitersComeOutWhenItEnds) {
  Activations a;
  EXPECT_TRUE(a.empty());
  EXPECT_TRUE(a.Begin("t1", {WaitKind::kIndefinitely, 0}));
  EXPECT_FALSE(a.Begin("t1", {WaitKind::kFor, 5}));  // already being read: its first entry stays
  ASSERT_NE(a.Find("t1"), nullptr);
  EXPECT_EQ(a.Find("t1")->entry.kind, WaitKind::kIndefinitely);
  EXPECT_EQ(a.Find("t2"), nullptr);
  a.Find("t1")->waiters.push_back(7);
  a.Find("t1")->waiters.push_back(9);
  size_t seen = 0;
  a.ForEach([&](std::string_view id, const DormantTasks::Entry&) {
    EXPECT_EQ(id, "t1");
    ++seen;
  });
  EXPECT_EQ(seen, 1u);
  EXPECT_EQ(a.End("t1"), (std::vector<uint64_t>{7, 9}));
  EXPECT_EQ(a.End("t1"), std::vector<uint64_t>{});
  EXPECT_TRUE(a.empty());
}

TEST(ActivationsTest, TheEmbeddersCallsOnATaskBeingReadAnswerAsTheyWillBeMade) {
  using Answer = Activations::Answer;
  Activations a;
  a.Begin("forever", {WaitKind::kIndefinitely, 0});
  a.Begin("inbox", {WaitKind::kReceive, 0});
  Activations::Activation& forever = *a.Find("forever");
  Activations::Activation& inbox = *a.Find("inbox");
  // A resume: the first only, and only for a wait that takes one.
  EXPECT_EQ(forever.Resume(), Answer::kLater);
  EXPECT_EQ(forever.Resume(), Answer::kRefused);
  EXPECT_EQ(inbox.Resume(), Answer::kRefused);
  // Messages: as many as the mailbox holds.
  EXPECT_EQ(inbox.Send(2), Answer::kLater);
  EXPECT_EQ(inbox.Send(2), Answer::kLater);
  EXPECT_EQ(inbox.Send(2), Answer::kFull);
  EXPECT_EQ(inbox.sends, 2u);
  // A cancel: after it, every call is refused.
  EXPECT_EQ(inbox.Cancel(), Answer::kLater);
  EXPECT_EQ(inbox.Cancel(), Answer::kRefused);
  EXPECT_EQ(inbox.Send(10), Answer::kRefused);
  EXPECT_EQ(forever.Cancel(), Answer::kLater);
  EXPECT_EQ(forever.Resume(), Answer::kRefused);
}

}  // namespace
}  // namespace lua_tasks
