// SPDX-License-Identifier: MIT
// TaskTable: the live tasks by key, in one open-addressing array.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace lua_tasks {

struct Task;

// Keys are handed out in sequence, so the slot of a key is the key itself,
// folded with its higher bits: the tasks started together sit together (a
// burst of starts fills neighbouring slots, with no hashing and no node
// allocated per task, as std::unordered_map did), and keys a capacity apart
// do not pile onto one slot. Such a table is one long run of occupied slots,
// so it probes Robin Hood style: an entry never sits further from its home
// slot than the one it displaced, a lookup stops at the first entry closer to
// home than itself (a miss costs a slot or two, not the run), and erasing
// shifts back only the displaced entries behind the hole. The table owns its
// Tasks.
class TaskTable {
 public:
  TaskTable();
  ~TaskTable();
  TaskTable(const TaskTable&) = delete;
  TaskTable& operator=(const TaskTable&) = delete;

  Task* Find(uint64_t key) const {
    const size_t i = Locate(key);
    return i == kAbsent ? nullptr : slots_[i].task.get();
  }
  // Adds t under t->key (non-zero, not present); returns t.
  Task* Insert(std::unique_ptr<Task> t);
  // Removes the task with `key` and hands it back (null if there is none).
  std::unique_ptr<Task> Erase(uint64_t key);
  size_t size() const { return size_; }
  size_t capacity() const { return slots_.size(); }

  // Calls f(Task&) for every task, in no particular order. f must not
  // insert or erase.
  template <typename F>
  void ForEach(F&& f) const {
    for (const Entry& e : slots_) {
      if (e.key != 0) f(*e.task);
    }
  }

 private:
  struct Entry {
    uint64_t key = 0;  // 0: empty
    std::unique_ptr<Task> task;
  };
  static constexpr size_t kMinCapacity = 64;
  static constexpr size_t kAbsent = SIZE_MAX;

  size_t Slot(uint64_t key) const { return (key ^ (key >> shift_)) & mask_; }
  size_t Distance(uint64_t key, size_t i) const { return (i - Slot(key)) & mask_; }  // from its home slot
  // The slot holding `key`, or kAbsent: the probe stops at an empty slot or
  // at the first entry closer to its home than `key` would be.
  size_t Locate(uint64_t key) const {
    for (size_t i = Slot(key), dist = 0;; i = (i + 1) & mask_, ++dist) {
      const uint64_t k = slots_[i].key;
      if (k == key) return i;
      if (k == 0 || Distance(k, i) < dist) return kAbsent;
    }
  }
  void Place(Entry e);  // Robin Hood insertion; capacity checked by the caller
  void Rehash(size_t capacity);

  std::vector<Entry> slots_;
  size_t mask_ = 0;
  int shift_ = 0;  // log2(capacity)
  size_t size_ = 0;
};

}  // namespace lua_tasks
