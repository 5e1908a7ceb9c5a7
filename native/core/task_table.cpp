// SPDX-License-Identifier: MIT
// TaskTable: the live tasks by key, in one open-addressing array.
#include "task_table.hpp"

#include <utility>

#include "scheduler.hpp"

namespace lua_tasks {

TaskTable::TaskTable() {
  Rehash(kMinCapacity);
}

TaskTable::~TaskTable() = default;

Task* TaskTable::Insert(std::unique_ptr<Task> t) {
  if ((size_ + 1) * 2 > slots_.size()) Rehash(slots_.size() * 2);  // load factor at most 1/2
  Task* out = t.get();
  const uint64_t key = t->key;
  Place(Entry{key, std::move(t)});
  ++size_;
  return out;
}

void TaskTable::Place(Entry e) {
  for (size_t i = Slot(e.key), dist = 0;; i = (i + 1) & mask_, ++dist) {
    Entry& here = slots_[i];
    if (here.key == 0) {
      here = std::move(e);
      return;
    }
    const size_t d = Distance(here.key, i);
    if (d < dist) {  // `here` is closer to home: it moves on instead
      std::swap(here, e);
      dist = d;
    }
  }
}

std::unique_ptr<Task> TaskTable::Erase(uint64_t key) {
  size_t i = Locate(key);
  if (i == kAbsent) return nullptr;
  std::unique_ptr<Task> out = std::move(slots_[i].task);
  slots_[i].key = 0;
  --size_;
  // Backward shift: each displaced entry behind the hole moves one slot
  // closer to home; the first entry at home (or an empty slot) ends it.
  for (size_t j = (i + 1) & mask_; slots_[j].key != 0 && Distance(slots_[j].key, j) > 0; j = (j + 1) & mask_) {
    slots_[i] = std::move(slots_[j]);
    slots_[j].key = 0;
    i = j;
  }
  // Give memory back after a burst, but not on every small dip.
  if (slots_.size() > kMinCapacity && size_ * 8 < slots_.size()) Rehash(slots_.size() / 2);
  return out;
}

void TaskTable::Rehash(size_t capacity) {
  std::vector<Entry> old = std::exchange(slots_, std::vector<Entry>(capacity));
  mask_ = capacity - 1;
  shift_ = 0;
  while ((size_t{1} << shift_) < capacity) ++shift_;
  for (Entry& e : old) {
    if (e.key != 0) Place(std::move(e));
  }
}

}  // namespace lua_tasks
