// SPDX-License-Identifier: MIT
// Tests for RingQueue: FIFO order across wrap-around and growth.
#include "core/base/ring_queue.hpp"

#include <deque>
#include <random>

#include <gtest/gtest.h>

namespace lua_tasks {
namespace {

TEST(RingQueue, KeepsFifoOrderWhenItGrowsWhileWrapped) {
  RingQueue<int> q;
  for (int i = 0; i < 10; ++i) q.push_back(i);
  for (int i = 0; i < 8; ++i) q.pop_front();     // head now mid-buffer
  for (int i = 10; i < 40; ++i) q.push_back(i);  // wraps, then grows twice
  ASSERT_EQ(q.size(), 32u);
  for (size_t i = 0; i < q.size(); ++i) EXPECT_EQ(q[i], static_cast<int>(i) + 8);
  for (int want = 8; want < 40; ++want) {
    ASSERT_FALSE(q.empty());
    EXPECT_EQ(q.front(), want);
    q.pop_front();
  }
  EXPECT_TRUE(q.empty());
}

TEST(RingQueue, MatchesDequeUnderRandomPushesAndPops) {
  RingQueue<uint64_t> q;
  std::deque<uint64_t> ref;
  std::mt19937_64 rng(7);
  uint64_t next = 0;
  for (int step = 0; step < 200000; ++step) {
    if (ref.empty() || rng() % 3 != 0) {
      q.push_back(next);
      ref.push_back(next++);
    } else {
      ASSERT_EQ(q.front(), ref.front());
      q.pop_front();
      ref.pop_front();
    }
    ASSERT_EQ(q.size(), ref.size());
    if (!ref.empty()) {
      ASSERT_EQ(q[ref.size() - 1], ref.back());
    }
    if (step % 50000 == 0) {
      q.clear();
      ref.clear();
    }
  }
}

}  // namespace
}  // namespace lua_tasks
