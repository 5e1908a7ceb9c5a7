// SPDX-License-Identifier: MIT
// TimerQueue: one heap of deadlines for all of a runtime's timed waits.
#include "core/scheduling/timer_queue.hpp"

namespace lua_tasks {

inline void TimerQueue::RemoveAt(uint32_t i) {
  FreeSlot(heap_[i].slot);
  const Node last = heap_.back();
  heap_.pop_back();
  if (i == heap_.size()) return;
  Place(i, last);
  if (i > 0 && Less(heap_[i], heap_[(i - 1) / kArity])) {
    SiftUp(i);
  } else {
    SiftDown(i);
  }
}

void TimerQueue::AddToHeap(const Node& n) {
  heap_.push_back({});
  Place(static_cast<uint32_t>(heap_.size() - 1), n);
  SiftUp(static_cast<uint32_t>(heap_.size() - 1));
}

bool TimerQueue::Cancel(Handle h, uint64_t payload) {
  if (h == 0 || h > slots_.size()) return false;
  Slot& s = slots_[h - 1];
  if (s.pos == kFree || s.pos == kCancelledInRun || s.payload != payload) return false;
  if (s.pos == kInRun) {
    s.pos = kCancelledInRun;
    --run_live_;
    TrimRun();
    if (run_.size() - run_live_ > run_live_ + kRunSlack) CompactRun();
    return true;
  }
  RemoveAt(s.pos);
  return true;
}

void TimerQueue::PopHeap() {
  RemoveAt(0);
}

void TimerQueue::TrimRun() {
  while (!run_.empty() && slots_[run_.front().slot].pos == kCancelledInRun) {
    FreeSlot(run_.front().slot);
    run_.pop_front();
  }
  while (!run_.empty() && slots_[run_.back().slot].pos == kCancelledInRun) {
    FreeSlot(run_.back().slot);
    run_.pop_back();
  }
}

void TimerQueue::CompactRun() {
  std::deque<Node> kept;
  for (const Node& n : run_) {
    if (slots_[n.slot].pos == kCancelledInRun) {
      FreeSlot(n.slot);
    } else {
      kept.push_back(n);
    }
  }
  run_.swap(kept);
}

// A 4-ary heap: half the depth of a binary one, and a node's four children
// share one or two cache lines, so a pop from a heap of a million waits
// misses the cache about half as often.
void TimerQueue::SiftUp(uint32_t i) {
  const Node n = heap_[i];
  while (i > 0) {
    const uint32_t parent = (i - 1) / kArity;
    if (!Less(n, heap_[parent])) break;
    Place(i, heap_[parent]);
    i = parent;
  }
  Place(i, n);
}

void TimerQueue::SiftDown(uint32_t i) {
  const Node n = heap_[i];
  const uint32_t size = static_cast<uint32_t>(heap_.size());
  for (;;) {
    const uint32_t first = kArity * i + 1;
    if (first >= size) break;
    const uint32_t last = first + kArity < size ? first + kArity : size;
    uint32_t child = first;
    for (uint32_t c = first + 1; c < last; ++c) {
      if (Less(heap_[c], heap_[child])) child = c;
    }
    if (!Less(heap_[child], n)) break;
    Place(i, heap_[child]);
    i = child;
  }
  Place(i, n);
}

}  // namespace lua_tasks
