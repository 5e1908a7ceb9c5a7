// SPDX-License-Identifier: MIT
// TaskTable: the live tasks by key, in one open-addressing array.
#include "core/scheduling/task_table.hpp"

#include <algorithm>
#include <new>
#include <utility>

#include "core/scheduling/task.hpp"

namespace lua_tasks {

TaskTable::TaskTable() : cur_(MakeArray(kMinCapacity)) {}

TaskTable::~TaskTable() {
  ForEach([](const Task& t) { delete &t; });
}

TaskTable::Array TaskTable::MakeArray(size_t capacity) {
  Array a;
  a.slots.reset(static_cast<Entry*>(std::calloc(capacity, sizeof(Entry))));
  if (!a.slots) throw std::bad_alloc();
  a.mask = capacity - 1;
  while ((size_t{1} << a.shift) < capacity) ++a.shift;
  return a;
}

Task* TaskTable::Insert(std::unique_ptr<Task> t) {
  if (resizing()) Move(MoveStep());
  if ((size_ + 1) * 2 > capacity()) {  // load factor at most 1/2 (size_ counts both arrays)
    // Not reached with these constants (a shrink leaves the new array at 1/4
    // load and finishes in 1/8 of its slots' worth of calls, before the
    // inserts that fill it to 1/2); kept so other constants stay correct.
    if (resizing()) Move(old_.mask + 1);
    StartResize(capacity() * 2);
  }
  Task* out = t.release();
  Place(cur_, Entry{out->key, out});
  ++size_;
  return out;
}

void TaskTable::Place(Array& a, Entry e) {
  for (size_t i = a.Slot(e.key), dist = 0;; i = (i + 1) & a.mask, ++dist) {
    Entry& here = a.slots[i];
    if (here.key == 0) {
      here = e;
      return;
    }
    const size_t d = a.Distance(here.key, i);
    if (d < dist) {  // `here` is closer to home: it moves on instead
      std::swap(here, e);
      dist = d;
      ++shifts_;
    }
  }
}

std::unique_ptr<Task> TaskTable::Erase(uint64_t key) {
  std::unique_ptr<Task> out;
  size_t i = Locate(cur_, key);
  if (i != kAbsent) {
    out.reset(cur_.slots[i].task);
    cur_.slots[i] = Entry{0, nullptr};
    // Backward shift: each displaced entry behind the hole moves one slot
    // closer to home; the first entry at home (or an empty slot) ends it.
    for (size_t j = (i + 1) & cur_.mask; cur_.slots[j].key != 0 && cur_.Distance(cur_.slots[j].key, j) > 0;
         j = (j + 1) & cur_.mask) {
      cur_.slots[i] = cur_.slots[j];
      cur_.slots[j] = Entry{0, nullptr};
      i = j;
      ++shifts_;
    }
  } else if (resizing() && (i = Locate(old_, key)) != kAbsent && old_.slots[i].task != nullptr) {
    out.reset(std::exchange(old_.slots[i].task, nullptr));
  } else {
    return nullptr;
  }
  --size_;
  if (resizing()) {
    Move(MoveStep());
  } else if (capacity() > kMinCapacity && size_ * kShrinkBelow < capacity()) {
    // Give memory back after a burst, in one step to a quarter load rather
    // than halving at each dip: every new array is fresh pages that fault in
    // as entries land, and halving from a million tasks down faulted 32 MB
    // over the drain (about 75 ms on the bench VM, in bursts that made wakes
    // late); this way it is 4 MB.
    StartResize(std::max(kMinCapacity, capacity() / kShrinkBy));
  }
  return out;
}

void TaskTable::StartResize(size_t capacity) {
  old_ = std::exchange(cur_, MakeArray(capacity));
  moved_ = 0;
}

void TaskTable::Move(size_t slots) {
  const size_t end = std::min(moved_ + slots, old_.mask + 1);
  for (; moved_ < end; ++moved_) {
    Entry& e = old_.slots[moved_];
    if (e.task != nullptr) Place(cur_, Entry{e.key, std::exchange(e.task, nullptr)});
  }
  if (moved_ > old_.mask) old_ = Array();
}

}  // namespace lua_tasks
