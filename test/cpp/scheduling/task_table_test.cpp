// SPDX-License-Identifier: MIT
// Tests for TaskTable: find/insert/erase against std::unordered_map, with
// sequential keys, keys a capacity apart, growth and shrinking.
#include "core/scheduling/task_table.hpp"

#include <algorithm>
#include <random>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>

#include "core/scheduling/task.hpp"

namespace lua_tasks {
namespace {

std::unique_ptr<Task> MakeTask(uint64_t key) {
  auto t = std::make_unique<Task>();
  t->key = key;
  return t;
}

TEST(TaskTable, FindsInsertedAndForgetsErased) {
  TaskTable table;
  EXPECT_EQ(table.Find(1), nullptr);
  Task* a = table.Insert(MakeTask(1));
  Task* b = table.Insert(MakeTask(2));
  EXPECT_EQ(table.Find(1), a);
  EXPECT_EQ(table.Find(2), b);
  EXPECT_EQ(table.size(), 2u);
  std::unique_ptr<Task> back = table.Erase(1);
  EXPECT_EQ(back.get(), a);
  EXPECT_EQ(table.Find(1), nullptr);
  EXPECT_EQ(table.Find(2), b);
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.Erase(1), nullptr);  // gone already: nothing, and no harm
  EXPECT_EQ(table.Erase(77), nullptr);
  EXPECT_EQ(table.size(), 1u);
}

TEST(TaskTable, KeysACapacityApartAllStayFindable) {
  TaskTable table;
  const uint64_t cap = table.capacity();
  std::vector<Task*> tasks;
  for (uint64_t i = 1; i <= 20; ++i) tasks.push_back(table.Insert(MakeTask(i * cap)));
  for (uint64_t i = 1; i <= 20; ++i) ASSERT_EQ(table.Find(i * cap), tasks[i - 1]);
  // Erasing from the middle of a probe run keeps the rest reachable.
  for (uint64_t i = 2; i <= 20; i += 2) table.Erase(i * cap);
  for (uint64_t i = 1; i <= 20; ++i) {
    if (i % 2 == 0) {
      EXPECT_EQ(table.Find(i * cap), nullptr);
    } else {
      EXPECT_EQ(table.Find(i * cap), tasks[i - 1]);
    }
  }
}

// Tasks that stay (100,000 waiting) beside many that start and end one at a
// time, the keys of the new ones passing the table's capacity several times
// over: each insert or erase moves a handful of entries, never a run of the
// ones that stay (laid out in key order, each new key wrapped onto that run
// and moved the rest of it: about 50,000 entries a call).
TEST(TaskTable, ShortTasksBesideManyWaitingOnesMoveFewEntries) {
  TaskTable table;
  const uint64_t waiting = 100000;
  for (uint64_t k = 1; k <= waiting; ++k) table.Insert(MakeTask(k));
  const uint64_t before = table.shifts();
  const uint64_t calls = 2 * 4 * table.capacity();
  for (uint64_t k = waiting + 1; k <= waiting + calls / 2; ++k) {
    table.Insert(MakeTask(k));
    ASSERT_NE(table.Erase(k), nullptr);
  }
  EXPECT_LT((table.shifts() - before) / calls, 4u);
  EXPECT_EQ(table.size(), waiting);
  for (uint64_t k = 1; k <= waiting; k += 997) ASSERT_NE(table.Find(k), nullptr);
}

TEST(TaskTable, ResizesAFewSlotsPerCall) {
  TaskTable table;
  uint64_t key = 1;
  while (!table.resizing()) table.Insert(MakeTask(key++));
  // The insert that grew the table moved almost nothing: the old array
  // empties over the next calls, and every task stays findable meanwhile,
  // including one erased while it still sits in the old array.
  const size_t old_capacity = table.capacity() / 2;
  ASSERT_EQ(table.Erase(1)->key, 1u);
  size_t calls = 1;
  while (table.resizing()) {
    table.Insert(MakeTask(key++));
    ++calls;
    for (uint64_t k = 2; k < key; ++k) ASSERT_NE(table.Find(k), nullptr) << "key " << k;
    ASSERT_EQ(table.Find(1), nullptr);
  }
  EXPECT_GT(calls, 1u);
  EXPECT_LE(calls, old_capacity / TaskTable::kMoveStep + 1);
  EXPECT_EQ(table.size(), key - 2);
  size_t seen = 0;
  table.ForEach([&](const Task&) { ++seen; });
  EXPECT_EQ(seen, table.size());
}

TEST(TaskTable, RefillingRightAfterAShrinkKeepsEveryTaskFindable) {
  TaskTable table;
  uint64_t key = 1;
  for (; key <= 4096; ++key) table.Insert(MakeTask(key));
  uint64_t first = 1;
  while (!table.resizing()) table.Erase(first++);  // drained: a shrink begins
  // Inserting until the smaller array grows again, the shrink's moves and
  // the growth interleaved.
  while (table.size() * 2 + 2 <= table.capacity()) table.Insert(MakeTask(key++));
  table.Insert(MakeTask(key++));
  for (uint64_t k = first; k < key; ++k) ASSERT_NE(table.Find(k), nullptr) << "key " << k;
  for (uint64_t k = 1; k < first; ++k) ASSERT_EQ(table.Find(k), nullptr) << "key " << k;
  EXPECT_EQ(table.size(), key - first);
}

// Every array a resize makes is fresh memory that faults in as entries land,
// so a drain shrinks once, to a quarter load, rather than halving at each
// step down; the move still finishes before inserts could refill it.
TEST(TaskTable, ADrainShrinksOnceToAQuarterLoad) {
  TaskTable table;
  uint64_t key = 1;
  for (; key <= 100000; ++key) table.Insert(MakeTask(key));
  const size_t peak = table.capacity();
  uint64_t first = 1;
  while (!table.resizing()) table.Erase(first++);
  EXPECT_EQ(table.capacity(), peak / TaskTable::kShrinkBy);
  EXPECT_LT(table.size() * TaskTable::kShrinkBelow, peak);
  EXPECT_LE(table.size() * 4, table.capacity());
  size_t calls = 0;
  while (table.resizing()) {
    table.Insert(MakeTask(key++));
    ++calls;
  }
  EXPECT_LE(calls, table.capacity() / TaskTable::kMoveStep + 1);
  EXPECT_LE(table.size() * 2, table.capacity());
  for (uint64_t k = first; k < key; ++k) ASSERT_NE(table.Find(k), nullptr) << "key " << k;
}

TEST(TaskTable, MatchesUnorderedMapUnderRandomOperations) {
  TaskTable table;
  std::unordered_map<uint64_t, Task*> ref;
  std::vector<uint64_t> live;
  std::mt19937_64 rng(11);
  uint64_t next = 1;
  size_t peak = 0;
  for (int step = 0; step < 300000; ++step) {
    // Phases: grow to ~20k, drain to a few, grow again (growth and shrinking).
    const bool growing = (step / 50000) % 2 == 0;
    if (live.empty() || rng() % 100 < (growing ? 70u : 25u)) {
      const uint64_t key = next++;
      ref[key] = table.Insert(MakeTask(key));
      live.push_back(key);
    } else {
      const size_t i = rng() % live.size();
      const uint64_t key = live[i];
      live[i] = live.back();
      live.pop_back();
      std::unique_ptr<Task> t = table.Erase(key);
      ASSERT_EQ(t.get(), ref[key]);
      ASSERT_EQ(t->key, key);
      ref.erase(key);
    }
    ASSERT_EQ(table.size(), ref.size());
    peak = std::max(peak, table.capacity());
    if (step % 997 == 0) {
      for (const auto& [k, t] : ref) ASSERT_EQ(table.Find(k), t);
      for (int j = 0; j < 50; ++j) {
        const uint64_t k = 1 + rng() % next;
        ASSERT_EQ(table.Find(k), ref.count(k) ? ref[k] : nullptr);
      }
      size_t seen = 0;
      table.ForEach([&](const Task& t) {
        ++seen;
        EXPECT_EQ(ref.at(t.key), &t);
      });
      ASSERT_EQ(seen, ref.size());
    }
  }
  // The table shrank after the drains rather than keeping its peak size.
  while (!live.empty()) {
    table.Erase(live.back());
    live.pop_back();
  }
  EXPECT_LT(table.capacity(), peak);
}

}  // namespace
}  // namespace lua_tasks
