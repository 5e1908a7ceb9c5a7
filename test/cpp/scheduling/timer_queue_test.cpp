// SPDX-License-Identifier: MIT
// Tests for TimerQueue: ordering, FIFO for equal deadlines, cancel, stale handles, scale.
#include "core/scheduling/timer_queue.hpp"

#include <algorithm>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace lua_tasks {
namespace {

std::vector<uint64_t> PopAll(TimerQueue& q, int64_t now) {
  std::vector<uint64_t> out;
  uint64_t p;
  TimerQueue::Handle h;
  while (q.PopIfDue(now, &p, &h)) out.push_back(p);
  return out;
}

TEST(TimerQueue, PopsInDeadlineOrderAndOnlyWhenDue) {
  TimerQueue q;
  q.Add(30, 3);
  q.Add(10, 1);
  q.Add(20, 2);
  EXPECT_EQ(q.NextDeadline(), 10);
  EXPECT_EQ(PopAll(q, 9), std::vector<uint64_t>{});
  EXPECT_EQ(PopAll(q, 20), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(PopAll(q, 100), std::vector<uint64_t>{3});
  EXPECT_TRUE(q.empty());
}

TEST(TimerQueue, EqualDeadlinesComeOutFirstInFirstOut) {
  TimerQueue q;
  for (uint64_t i = 0; i < 100; ++i) q.Add(5, i);
  std::vector<uint64_t> want(100);
  for (uint64_t i = 0; i < 100; ++i) want[i] = i;
  EXPECT_EQ(PopAll(q, 5), want);
}

TEST(TimerQueue, CancelRemovesTheEntryAndStaleHandlesDoNothing) {
  TimerQueue q;
  const auto a = q.Add(10, 1);
  const auto b = q.Add(20, 2);
  EXPECT_TRUE(q.Cancel(a, 1));
  EXPECT_FALSE(q.Cancel(a, 1));  // already gone
  const auto c = q.Add(15, 3);   // may reuse a's slot
  EXPECT_FALSE(q.Cancel(a, 1));  // the old handle names another payload now
  EXPECT_EQ(PopAll(q, 100), (std::vector<uint64_t>{3, 2}));
  EXPECT_FALSE(q.Cancel(b, 2));
  EXPECT_FALSE(q.Cancel(c, 3));
  EXPECT_FALSE(q.Cancel(0, 0));
}

// Waits added in deadline order (the same duration, each from its own now)
// take the queue's sorted run; others its heap. Mixed, with cancels at
// either end of the run and in its middle, they still pop in order.
TEST(TimerQueue, InOrderAndOutOfOrderEntriesMergeAndCancelAnywhere) {
  TimerQueue q;
  const auto a = q.Add(10, 1);  // the run: 10, 20, 30, 40
  const auto b = q.Add(20, 2);
  q.Add(15, 3);  // before the run's last: the heap
  const auto c = q.Add(30, 4);
  q.Add(30, 5);  // equal to the last: still after it
  const auto d = q.Add(40, 6);
  q.Add(5, 7);
  EXPECT_EQ(q.size(), 7u);
  EXPECT_EQ(q.NextDeadline(), 5);
  EXPECT_TRUE(q.Cancel(c, 4));  // the run's middle
  EXPECT_FALSE(q.Cancel(c, 4));
  EXPECT_TRUE(q.Cancel(d, 6));  // its last
  EXPECT_TRUE(q.Cancel(a, 1));  // its first
  EXPECT_EQ(q.size(), 4u);
  EXPECT_EQ(q.NextDeadline(), 5);
  EXPECT_EQ(PopAll(q, 15), (std::vector<uint64_t>{7, 3}));
  EXPECT_EQ(q.NextDeadline(), 20);
  EXPECT_EQ(PopAll(q, 100), (std::vector<uint64_t>{2, 5}));
  EXPECT_TRUE(q.empty());
  EXPECT_FALSE(q.Cancel(b, 2));
}

// A task that re-arms a long timeout and is woken early each time (receive
// with a timeout, answered at once) cancels entries in the run's middle:
// they are dropped as they pile up, and a handle stays valid meanwhile.
TEST(TimerQueue, CancelledEntriesOfTheRunDoNotPileUp) {
  TimerQueue q;
  const auto keep = q.Add(1, 0);  // the run's front stays live throughout
  auto prev = q.Add(1000, 1);
  for (uint64_t i = 2; i <= 100000; ++i) {
    const auto h = q.Add(static_cast<int64_t>(1000 + i), i);
    ASSERT_TRUE(q.Cancel(prev, i - 1));  // behind the front, before the last: the middle
    prev = h;
    ASSERT_LE(q.held(), 2 * q.size() + 100);
  }
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(PopAll(q, INT64_MAX), (std::vector<uint64_t>{0, 100000}));
  EXPECT_FALSE(q.Cancel(keep, 0));
  EXPECT_EQ(q.held(), 0u);
}

TEST(TimerQueue, AMillionEntriesWithRandomCancelsStayOrdered) {
  TimerQueue q;
  std::mt19937_64 rng(42);
  std::vector<std::pair<TimerQueue::Handle, uint64_t>> handles;
  std::vector<int64_t> deadline(1000000);
  for (uint64_t i = 0; i < 1000000; ++i) {
    deadline[i] = static_cast<int64_t>(rng() % 5000000);
    handles.push_back({q.Add(deadline[i], i), i});
  }
  size_t cancelled = 0;
  for (size_t i = 0; i < handles.size(); i += 3) {
    ASSERT_TRUE(q.Cancel(handles[i].first, handles[i].second));
    ++cancelled;
  }
  EXPECT_EQ(q.size(), 1000000 - cancelled);
  int64_t last = -1;
  uint64_t last_payload = 0;
  uint64_t p;
  TimerQueue::Handle h;
  size_t n = 0;
  while (q.PopIfDue(INT64_MAX, &p, &h)) {
    ASSERT_NE(p % 3, 0u) << "a cancelled entry fired";
    ASSERT_GE(deadline[p], last);
    if (deadline[p] == last) {
      ASSERT_GT(p, last_payload);  // FIFO among equals
    }
    last = deadline[p];
    last_payload = p;
    ++n;
  }
  EXPECT_EQ(n, 1000000 - cancelled);
}

}  // namespace
}  // namespace lua_tasks
