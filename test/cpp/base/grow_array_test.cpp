// SPDX-License-Identifier: MIT
// Tests for GrowArray: values survive every doubling, small arrays stay in
// malloc memory and large ones move to a mapping of their own.
#include "core/base/grow_array.hpp"

#include <cstdint>
#include <utility>

#include <gtest/gtest.h>

namespace lua_tasks {
namespace {

struct Entry {
  int64_t a;
  uint64_t b;
  uint32_t c;
};

TEST(GrowArray, KeepsEveryValueAcrossDoublings) {
  GrowArray<Entry> v;
  EXPECT_TRUE(v.empty());
  const uint32_t n = 200000;  // 4.8 MB: past kMapBytes, so the mapped path runs too
  for (uint32_t i = 0; i < n; ++i) v.push_back({-static_cast<int64_t>(i), i * 7u, i});
  ASSERT_EQ(v.size(), n);
  for (uint32_t i = 0; i < n; ++i) {
    ASSERT_EQ(v[i].a, -static_cast<int64_t>(i));
    ASSERT_EQ(v[i].b, i * 7u);
    ASSERT_EQ(v[i].c, i);
  }
  EXPECT_EQ(v.front().c, 0u);
  EXPECT_EQ(v.back().c, n - 1);
  v.pop_back();
  EXPECT_EQ(v.back().c, n - 2);
  EXPECT_EQ(v.size(), n - 1);
}

TEST(GrowArray, MovesToAMappingOnlyOnceLarge) {
  GrowArray<uint32_t> v;
  const size_t small = GrowArray<uint32_t>::kMapBytes / sizeof(uint32_t) / 2;
  while (v.size() < small) v.push_back(static_cast<uint32_t>(v.size()));
  EXPECT_FALSE(v.mapped());
  while (v.capacity() * sizeof(uint32_t) < 4 * GrowArray<uint32_t>::kMapBytes) {
    v.push_back(static_cast<uint32_t>(v.size()));
  }
  EXPECT_EQ(v.mapped(), kCanRemap);
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], i);
}

TEST(GrowArray, PopToEmptyAndRefill) {
  GrowArray<uint64_t> v;
  for (int round = 0; round < 3; ++round) {
    for (uint64_t i = 0; i < 1000; ++i) v.push_back(i + round);
    for (uint64_t i = 1000; i-- > 0;) {
      ASSERT_EQ(v.back(), i + round);
      v.pop_back();
    }
    EXPECT_TRUE(v.empty());
  }
}

TEST(GrowArray, AMoveTakesTheArrayAndLeavesAnEmptyOne) {
  for (const size_t n : {size_t{10}, GrowArray<uint32_t>::kMapBytes}) {  // in malloc memory, then mapped
    GrowArray<uint32_t> a;
    for (uint32_t i = 0; i < n; ++i) a.push_back(i);
    GrowArray<uint32_t> b(std::move(a));
    EXPECT_TRUE(a.empty());
    EXPECT_EQ(a.capacity(), 0u);
    ASSERT_EQ(b.size(), n);
    GrowArray<uint32_t> c;
    c.push_back(99);
    c = std::move(b);  // frees c's own array
    ASSERT_EQ(c.size(), n);
    for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(c[i], i);
    a.push_back(7);  // a moved-from array is usable
    EXPECT_EQ(a.back(), 7u);
  }
}

TEST(GrowArray, RoomHandsOutSpaceThatCommitAdds) {
  GrowArray<char> v;
  v.reserve(512);
  EXPECT_EQ(v.capacity(), 512u);
  EXPECT_TRUE(v.empty());
  // Records of varying size, each committed shorter than the room asked for,
  // across the move to a mapping.
  size_t written = 0;
  while (written < 2 * GrowArray<char>::kMapBytes) {
    const size_t n = written % 97 + 1;
    char* p = v.Room(n + 10);
    ASSERT_GE(v.capacity() - v.size(), n + 10);
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<char>(written + i);
    v.Commit(n);
    written += n;
  }
  ASSERT_EQ(v.size(), written);
  for (size_t i = 0; i < written; ++i) ASSERT_EQ(v.data()[i], static_cast<char>(i));
  EXPECT_EQ(v.mapped(), kCanRemap);
  // One large Room grows past a single doubling, and stays whole pages.
  const size_t before = v.capacity();
  v.Room(16 * before);
  EXPECT_GE(v.capacity(), v.size() + 16 * before);
  EXPECT_EQ(v.capacity() & (v.capacity() - 1), 0u);
}

}  // namespace
}  // namespace lua_tasks
