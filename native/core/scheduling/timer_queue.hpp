// SPDX-License-Identifier: MIT
// TimerQueue: one heap of deadlines for all of a runtime's timed waits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

#include "core/base/grow_array.hpp"

namespace lua_tasks {

// Entries are ordered by (deadline, insertion order), so waits that fall due
// at the same instant come out first-in, first-out. Each entry has a slot
// that remembers where it is, so Cancel never leaves a live entry to fire
// later. A Handle is only meaningful until its entry pops or is cancelled;
// the owner forgets it then (slots are reused).
//
// Two stores, merged at every pop. Most timed waits are added in deadline
// order: tasks that wait the same duration, each from the moment it woke
// (bench W5: 10,000 tasks x FOR 1 ms, where a heap pop's sift-down over the
// 10,000 was 470 instructions a wake, more than the task's resume). So an
// entry whose deadline is not before the last one appended joins `run_`, a
// FIFO that stays sorted: its add and pop are O(1) and touch memory in
// order. Any other entry goes to the 4-ary heap. A cancelled entry of the run
// is only marked (its slot kept until the entry leaves, so the slot cannot be
// reused meanwhile); the run's front is never a cancelled one, and the run is
// compacted when cancelled entries outnumber live ones, so it holds at most
// about twice its live entries.
class TimerQueue {
 public:
  using Handle = uint32_t;  // 0 = no timer

  Handle Add(int64_t deadline, uint64_t payload);
  // Removes the entry if `h` still holds `payload`; returns whether it did.
  bool Cancel(Handle h, uint64_t payload);
  bool empty() const { return heap_.empty() && run_.empty(); }
  size_t size() const { return heap_.size() + run_live_; }
  // Entries held, the run's cancelled ones included (tests check the bound).
  size_t held() const { return heap_.size() + run_.size(); }
  // The earliest deadline; the queue must not be empty.
  int64_t NextDeadline() const {
    if (run_.empty()) return heap_.front().deadline;
    if (heap_.empty()) return run_.front().deadline;
    return Less(heap_.front(), run_.front()) ? heap_.front().deadline : run_.front().deadline;
  }
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
    uint32_t pos;  // index in heap_, kFree, kInRun, or kCancelledInRun
    uint64_t payload;
  };
  static constexpr uint32_t kFree = UINT32_MAX;
  static constexpr uint32_t kInRun = UINT32_MAX - 1;
  static constexpr uint32_t kCancelledInRun = UINT32_MAX - 2;
  // Cancelled entries the run may hold beyond its live ones before it is
  // compacted.
  static constexpr size_t kRunSlack = 64;
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
  // Inlined into PopIfDue, where i is 0, as into Cancel.
  [[gnu::always_inline]] inline void RemoveAt(uint32_t i);
  // Inlined: they are on every add and pop.
  [[gnu::always_inline]] uint32_t NewSlot(uint64_t payload) {
    uint32_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else {
      slot = static_cast<uint32_t>(slots_.size());
      slots_.push_back({});
    }
    slots_[slot].payload = payload;
    return slot;
  }
  [[gnu::always_inline]] void FreeSlot(uint32_t slot) {
    slots_[slot].pos = kFree;
    free_.push_back(slot);
  }
  void AddToHeap(const Node& n);  // Add's entry out of deadline order
  void PopHeap();                 // PopIfDue's entry from the heap
  void TrimRun();                 // drops cancelled entries from the run's ends
  void CompactRun();              // drops every cancelled entry of the run

  // Not std::vector: growing to a million timers never copies them all in
  // one Add (see GrowArray).
  GrowArray<Node> heap_;
  GrowArray<Slot> slots_;
  GrowArray<uint32_t> free_;
  // Sorted by (deadline, seq); its front is live. A deque, not a ring that
  // doubles: no Add ever copies a million entries at once.
  std::deque<Node> run_;
  size_t run_live_ = 0;  // entries of run_ not cancelled
  uint64_t next_seq_ = 0;
};

// Inline: a timed wake adds one entry and pops one, nearly always in the run.
inline TimerQueue::Handle TimerQueue::Add(int64_t deadline, uint64_t payload) {
  const uint32_t slot = NewSlot(payload);
  const Node n{deadline, next_seq_++, slot};
  if (run_.empty() || deadline >= run_.back().deadline) {
    run_.push_back(n);
    slots_[slot].pos = kInRun;
    ++run_live_;
  } else {
    AddToHeap(n);
  }
  return slot + 1;
}

inline bool TimerQueue::PopIfDue(int64_t now, uint64_t before_seq, uint64_t* payload, Handle* handle) {
  const bool from_run = !run_.empty() && (heap_.empty() || Less(run_.front(), heap_.front()));
  if (!from_run && heap_.empty()) return false;
  const Node& n = from_run ? run_.front() : heap_.front();
  if (n.deadline > now || n.seq >= before_seq) return false;
  const uint32_t slot = n.slot;
  *payload = slots_[slot].payload;
  *handle = slot + 1;
  if (from_run) {
    FreeSlot(slot);
    run_.pop_front();
    --run_live_;
    // Both ends were live (Cancel trims them): only the new front can be a
    // cancelled entry.
    if (!run_.empty() && slots_[run_.front().slot].pos == kCancelledInRun) TrimRun();
  } else {
    PopHeap();
  }
  return true;
}

}  // namespace lua_tasks
