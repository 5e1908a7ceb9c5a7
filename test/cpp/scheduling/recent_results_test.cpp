// SPDX-License-Identifier: MIT
// Tests for RecentResults: the last N outcomes, found by key, the oldest dropped.
#include "core/scheduling/recent_results.hpp"

#include <algorithm>
#include <deque>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/scheduling/task.hpp"  // TaskStatus

namespace lua_tasks {
namespace {

FinishedTask Outcome(uint64_t key, int nres) {
  FinishedTask f;
  f.key = key;
  f.status = TaskStatus::kDone;
  f.nres = nres;
  return f;
}

TEST(RecentResults, FindsWhatWasAddedAndNothingElse) {
  RecentResults r(4);
  EXPECT_EQ(r.Find(1), nullptr);
  r.Add(Outcome(7, 1));
  r.Add(Outcome(3, 2));
  ASSERT_NE(r.Find(7), nullptr);
  EXPECT_EQ(r.Find(7)->nres, 1);
  EXPECT_EQ(r.Find(3)->nres, 2);
  EXPECT_EQ(r.Find(4), nullptr);
  EXPECT_EQ(r.size(), 2u);
}

TEST(RecentResults, KeepsExactlyTheLastNInTheOrderTheyEnded) {
  // Tasks end in any order: keys arrive shuffled. Checked against a deque
  // after every add, across many wrap-arounds of the ring and probe runs.
  constexpr size_t kCap = 64;
  RecentResults r(kCap);
  std::vector<uint64_t> keys(5000);
  std::iota(keys.begin(), keys.end(), 1);
  std::mt19937_64 rng(12345);
  std::shuffle(keys.begin(), keys.end(), rng);
  std::deque<uint64_t> kept;
  for (size_t i = 0; i < keys.size(); ++i) {
    r.Add(Outcome(keys[i], static_cast<int>(i % 7)));
    kept.push_back(keys[i]);
    if (kept.size() > kCap) kept.pop_front();
    ASSERT_EQ(r.size(), kept.size());
    for (uint64_t k : kept) {
      const FinishedTask* f = r.Find(k);
      ASSERT_NE(f, nullptr) << "key " << k << " after " << i + 1 << " adds";
      ASSERT_EQ(f->key, k);
    }
    if (i >= kCap) {
      ASSERT_EQ(r.Find(keys[i - kCap]), nullptr);
    }
  }
}

TEST(RecentResults, KeysAlikeInTheirLowBitsAreKeptApart) {
  // Multiples of a large power of two: a weak hash would crowd them into a
  // few home slots, and deletions must keep every probe run unbroken.
  RecentResults r(16);
  for (uint64_t i = 1; i <= 200; ++i) {
    r.Add(Outcome(i << 40, 0));
    for (uint64_t j = (i > 16 ? i - 15 : 1); j <= i; ++j) ASSERT_NE(r.Find(j << 40), nullptr) << i << " " << j;
    if (i > 16) {
      ASSERT_EQ(r.Find((i - 16) << 40), nullptr);
    }
  }
}

}  // namespace
}  // namespace lua_tasks
