// SPDX-License-Identifier: MIT
#include "core/durable/kept_ends.hpp"

#include <string>

#include <gtest/gtest.h>

namespace lua_tasks {
namespace {

TEST(KeptEndsTest, KeepsTheLatestByCountAndDropsTheOldestFirst) {
  KeptEnds ends;
  const size_t n = KeptEnds::kMaxCount + 10;
  for (uint64_t k = 1; k <= n; ++k) ends.Put(k, "end " + std::to_string(k));
  EXPECT_EQ(ends.size(), KeptEnds::kMaxCount);
  EXPECT_EQ(ends.Find(1), nullptr);
  EXPECT_EQ(ends.Find(10), nullptr);
  ASSERT_NE(ends.Find(11), nullptr);
  EXPECT_EQ(*ends.Find(n), "end " + std::to_string(n));
}

TEST(KeptEndsTest, KeepsWithinItsBytesAndNeverOneTooLarge) {
  KeptEnds ends;
  const std::string mib(size_t{1} << 20, 'x');
  for (uint64_t k = 1; k <= 100; ++k) ends.Put(k, mib);
  EXPECT_LE(ends.bytes(), KeptEnds::kMaxBytes);
  EXPECT_EQ(ends.Find(1), nullptr);
  EXPECT_NE(ends.Find(100), nullptr);
  ends.Put(200, std::string(KeptEnds::kMaxBytes / 16 + 1, 'y'));
  EXPECT_EQ(ends.Find(200), nullptr);
}

TEST(KeptEndsTest, EraseAndPutAgainKeepBytesExact) {
  KeptEnds ends;
  ends.Put(1, "abc");
  ends.Put(1, "abcdef");
  EXPECT_EQ(ends.bytes(), 6u);
  ends.Erase(1);
  EXPECT_EQ(ends.bytes(), 0u);
  EXPECT_EQ(ends.Find(1), nullptr);
  // Erased and kept again many times: the order stays bounded and right.
  for (int round = 0; round < 1000; ++round) {
    ends.Put(7, "seven");
    ends.Erase(7);
  }
  ends.Put(7, "seven");
  EXPECT_EQ(ends.size(), 1u);
  EXPECT_EQ(*ends.Find(7), "seven");
}

}  // namespace
}  // namespace lua_tasks
