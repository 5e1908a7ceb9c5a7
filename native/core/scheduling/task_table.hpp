// SPDX-License-Identifier: MIT
// TaskTable: the live tasks by key, in one open-addressing array.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

namespace lua_tasks {

struct Task;

// Keys are handed out in sequence. Eight consecutive keys share a group of
// eight neighbouring slots, and a group's place is hashed (Fibonacci): a
// burst of starts fills a few cache lines, not one scattered line per task,
// and no node is allocated per task (as std::unordered_map did). Groups are
// scattered, not laid end to end: with one long run of tasks that stay (keys
// mapped to slots in order), each new key that wrapped around onto that run
// had to shift the rest of it, so starting a short task beside 100,000
// waiting ones cost 20-80 us. It probes Robin Hood style: an entry never
// sits further from its home slot than the one it displaced, a lookup stops
// at the first entry closer to home than itself, and erasing shifts back
// only the displaced entries behind the hole. The table owns its Tasks.
//
// Resizing is incremental, as Redis does it: a new array takes every insert
// while each later insert or erase moves the entries of a few slots of the
// old one, so no single call pays for the whole table (rehashing a million
// entries at once held the loop 20-90 ms in bench W7). Arrays come from
// calloc: an all-zero array is empty, and the pages of a fresh one are only
// touched as entries land in them.
class TaskTable {
 public:
  TaskTable();
  ~TaskTable();
  TaskTable(const TaskTable&) = delete;
  TaskTable& operator=(const TaskTable&) = delete;

  Task* Find(uint64_t key) const {
    const size_t i = Locate(cur_, key);
    if (i != kAbsent) return cur_.slots[i].task;
    if (old_.slots == nullptr) return nullptr;
    const size_t j = Locate(old_, key);
    return j == kAbsent ? nullptr : old_.slots[j].task;  // null once moved or erased
  }
  // Adds t under t->key (non-zero, not present); returns t.
  Task* Insert(std::unique_ptr<Task> t);
  // Removes the task with `key` and hands it back (null if there is none).
  std::unique_ptr<Task> Erase(uint64_t key);
  size_t size() const { return size_; }
  size_t capacity() const { return cur_.mask + 1; }
  // Entries moved within an array by inserts and erases so far: the probing
  // work, which tests check stays small per call.
  uint64_t shifts() const { return shifts_; }
  bool resizing() const { return old_.slots != nullptr; }

  // Calls f(Task&) for every task, in no particular order. f must not
  // insert or erase.
  template <typename F>
  void ForEach(F&& f) const {
    for (size_t i = 0; i <= cur_.mask; ++i) {
      if (cur_.slots[i].key != 0) f(*cur_.slots[i].task);
    }
    if (old_.slots == nullptr) return;
    for (size_t i = moved_; i <= old_.mask; ++i) {
      if (old_.slots[i].task != nullptr) f(*old_.slots[i].task);
    }
  }

  // Slots of the old array moved per insert or erase while growing (times
  // kShrinkBy while shrinking): enough to finish long before the new array
  // passes its load factor.
  static constexpr size_t kMoveStep = 8;
  // Below 1/kShrinkBelow load the table shrinks kShrinkBy times (to 1/4).
  static constexpr size_t kShrinkBelow = 32;
  static constexpr size_t kShrinkBy = 8;

 private:
  // key 0: empty. In the old array, a moved or erased entry keeps its key
  // (probes pass through it) and loses its task.
  struct Entry {
    uint64_t key;
    Task* task;  // owned
  };
  struct Free {
    void operator()(Entry* p) const { std::free(p); }
  };
  struct Array {
    std::unique_ptr<Entry[], Free> slots;
    size_t mask = 0;
    int shift = 0;  // log2(capacity)
    size_t Slot(uint64_t key) const {
      const uint64_t group = ((key >> kGroupBits) * 0x9E3779B97F4A7C15ull) >> (64 - (shift - kGroupBits));
      return static_cast<size_t>((group << kGroupBits) | (key & ((1u << kGroupBits) - 1)));
    }
    size_t Distance(uint64_t key, size_t i) const { return (i - Slot(key)) & mask; }  // from its home slot
  };
  static constexpr size_t kMinCapacity = 64;
  static constexpr int kGroupBits = 3;
  static constexpr size_t kAbsent = SIZE_MAX;

  // The slot holding `key`, or kAbsent: the probe stops at an empty slot or
  // at the first entry closer to its home than `key` would be.
  static size_t Locate(const Array& a, uint64_t key) {
    for (size_t i = a.Slot(key), dist = 0;; i = (i + 1) & a.mask, ++dist) {
      const uint64_t k = a.slots[i].key;
      if (k == key) return i;
      if (k == 0 || a.Distance(k, i) < dist) return kAbsent;
    }
  }
  static Array MakeArray(size_t capacity);
  void Place(Array& a, Entry e);  // Robin Hood insertion; capacity checked by the caller
  void StartResize(size_t capacity);
  void Move(size_t slots);  // moves the live entries of the next `slots` old slots
  // Old slots moved per call: a shrink by N empties N times more than a
  // growth, to be done before inserts fill the small array to its load factor.
  size_t MoveStep() const { return kMoveStep * std::max<size_t>(1, (old_.mask + 1) / (cur_.mask + 1)); }

  Array cur_;
  Array old_;         // while resizing: the array being emptied into cur_
  size_t moved_ = 0;  // old slots below this are moved
  size_t size_ = 0;   // live tasks in both arrays
  uint64_t shifts_ = 0;
};

}  // namespace lua_tasks
