// SPDX-License-Identifier: MIT
// Tests for TakeWaitCensus: counts by wait kind and the oldest wait's start, ended tasks left out.
#include "core/scheduling/wait_census.hpp"

#include <memory>

#include <gtest/gtest.h>

#include "core/scheduling/task.hpp"

namespace lua_tasks {
namespace {

void Add(TaskTable& table, uint64_t key, TaskStatus status, WaitKind wait, int64_t wait_start) {
  auto t = std::make_unique<Task>();
  t->key = key;
  t->status = status;
  t->wait = wait;
  t->wait_start = wait_start;
  table.Insert(std::move(t));
}

size_t Slot(WaitKind k) {
  return static_cast<size_t>(k);
}

TEST(WaitCensus, AnEmptyTableHasNoWaits) {
  TaskTable table;
  const WaitCensus c = TakeWaitCensus(table);
  EXPECT_FALSE(c.any_waiting);
  for (uint32_t n : c.waiting) EXPECT_EQ(n, 0u);
}

TEST(WaitCensus, CountsEachWaitKindAndFindsTheOldestWait) {
  TaskTable table;
  Add(table, 1, TaskStatus::kWaiting, WaitKind::kFor, 500);
  Add(table, 2, TaskStatus::kWaiting, WaitKind::kFor, 300);
  Add(table, 3, TaskStatus::kWaiting, WaitKind::kPromise, 200);
  Add(table, 4, TaskStatus::kWaiting, WaitKind::kReceive, 900);
  Add(table, 5, TaskStatus::kRunning, WaitKind::kFor, 100);  // a stale wait field: running counts as kNone
  const WaitCensus c = TakeWaitCensus(table);
  EXPECT_EQ(c.waiting[Slot(WaitKind::kFor)], 2u);
  EXPECT_EQ(c.waiting[Slot(WaitKind::kPromise)], 1u);
  EXPECT_EQ(c.waiting[Slot(WaitKind::kReceive)], 1u);
  EXPECT_EQ(c.waiting[Slot(WaitKind::kNone)], 1u);
  EXPECT_EQ(c.waiting[Slot(WaitKind::kCommit)], 0u);
  ASSERT_TRUE(c.any_waiting);
  EXPECT_EQ(c.oldest_wait_start, 200);  // the running task's old wait_start is not a wait
}

TEST(WaitCensus, EndedTasksStillInTheTableAreNotCounted) {
  TaskTable table;
  Add(table, 1, TaskStatus::kDone, WaitKind::kFor, 10);
  Add(table, 2, TaskStatus::kFailed, WaitKind::kNone, 10);
  Add(table, 3, TaskStatus::kCancelled, WaitKind::kJoin, 10);
  Add(table, 4, TaskStatus::kWaiting, WaitKind::kIndefinitely, 70);
  const WaitCensus c = TakeWaitCensus(table);
  EXPECT_EQ(c.waiting[Slot(WaitKind::kFor)], 0u);
  EXPECT_EQ(c.waiting[Slot(WaitKind::kNone)], 0u);
  EXPECT_EQ(c.waiting[Slot(WaitKind::kJoin)], 0u);
  EXPECT_EQ(c.waiting[Slot(WaitKind::kIndefinitely)], 1u);
  EXPECT_EQ(c.oldest_wait_start, 70);
}

}  // namespace
}  // namespace lua_tasks
