// SPDX-License-Identifier: MIT
// TimerQueue: one heap of deadlines for all of a runtime's timed waits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/base/grow_array.hpp"

namespace lua_tasks {

// Entries are ordered by (deadline, insertion order), so waits that fall due
// at the same instant come out first-in, first-out. Each entry has a slot
// that remembers its heap position, so Cancel is O(log n) and never leaves a
// dead entry to fire later. A Handle is only meaningful until its entry pops
// or is cancelled; the owner forgets it then (slots are reused).
class TimerQueue {
 public:
  using Handle = uint32_t;  // 0 = no timer

  Handle Add(int64_t deadline, uint64_t payload);
  // Removes the entry if `h` still holds `payload`; returns whether it did.
  bool Cancel(Handle h, uint64_t payload);
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  // The earliest deadline; the queue must not be empty.
  int64_t NextDeadline() const { return heap_.front().deadline; }
  // Pops the earliest entry if its deadline is <= now and it was added
  // before the entry numbered `before_seq` (see next_seq).
  bool PopIfDue(int64_t now, uint64_t before_seq, uint64_t* payload, Handle* handle);
  bool PopIfDue(int64_t now, uint64_t* payload, Handle* handle) { return PopIfDue(now, UINT64_MAX, payload, handle); }
  // The number the next Add will get: entries are numbered in insertion order.
  uint64_t next_seq() const { return next_seq_; }

 private:
  struct Node {
    int64_t deadline;
    uint64_t seq;
    uint32_t slot;
  };
  struct Slot {
    uint32_t pos;  // index in heap_, or kFree
    uint64_t payload;
  };
  static constexpr uint32_t kFree = UINT32_MAX;
  static constexpr uint32_t kArity = 4;

  static bool Less(const Node& a, const Node& b) {
    return a.deadline < b.deadline || (a.deadline == b.deadline && a.seq < b.seq);
  }
  void Place(uint32_t i, const Node& n) {
    heap_[i] = n;
    slots_[n.slot].pos = i;
  }
  void SiftUp(uint32_t i);
  void SiftDown(uint32_t i);
  void RemoveAt(uint32_t i);

  // Not std::vector: growing to a million timers never copies them all in
  // one Add (see GrowArray).
  GrowArray<Node> heap_;
  GrowArray<Slot> slots_;
  GrowArray<uint32_t> free_;
  uint64_t next_seq_ = 0;
};

}  // namespace lua_tasks
