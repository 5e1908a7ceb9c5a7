// SPDX-License-Identifier: MIT
// RecentResults: the outcomes of the last N ended tasks, found by key in O(1).
#include "core/scheduling/recent_results.hpp"

#include <utility>

namespace lua_tasks {

RecentResults::RecentResults(size_t capacity) : ring_(capacity) {
  size_t slots = 2;
  int bits = 1;
  while (slots < 2 * capacity) {
    slots *= 2;
    ++bits;
  }
  index_.assign(slots, kEmpty);
  shift_ = 64 - bits;
}

void RecentResults::Add(FinishedTask f) {
  if (ring_.empty()) return;
  if (count_ == ring_.size()) {
    Erase(ring_[next_].key);  // the oldest lives where the next one goes
  } else {
    ++count_;
  }
  const uint64_t key = f.key;
  ring_[next_] = std::move(f);
  const size_t mask = index_.size() - 1;
  size_t i = Home(key);
  while (index_[i] != kEmpty) i = (i + 1) & mask;
  index_[i] = static_cast<uint32_t>(next_);
  next_ = (next_ + 1) % ring_.size();
}

const FinishedTask* RecentResults::Find(uint64_t key) const {
  const size_t mask = index_.size() - 1;
  for (size_t i = Home(key); index_[i] != kEmpty; i = (i + 1) & mask) {
    if (ring_[index_[i]].key == key) return &ring_[index_[i]];
  }
  return nullptr;
}

void RecentResults::Erase(uint64_t key) {
  const size_t mask = index_.size() - 1;
  size_t i = Home(key);
  while (index_[i] != kEmpty && ring_[index_[i]].key != key) i = (i + 1) & mask;
  if (index_[i] == kEmpty) return;
  // Backward-shift: pull later entries of the probe run into the hole unless
  // that would move one before its home slot.
  size_t hole = i;
  for (size_t j = (i + 1) & mask; index_[j] != kEmpty; j = (j + 1) & mask) {
    const size_t home = Home(ring_[index_[j]].key);
    const bool movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
    if (movable) {
      index_[hole] = index_[j];
      hole = j;
    }
  }
  index_[hole] = kEmpty;
}

}  // namespace lua_tasks
