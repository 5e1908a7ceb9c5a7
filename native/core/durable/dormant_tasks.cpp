// SPDX-License-Identifier: MIT
// DormantTasks: the durable tasks Runtime.open left in the store (see dormant_tasks.hpp).
#include "core/durable/dormant_tasks.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace lua_tasks {

namespace {
// The heap's order: the earliest wake on top.
constexpr auto kLater = [](const auto& a, const auto& b) { return a.wall > b.wall; };
size_t HashOf(std::string_view id) {
  return std::hash<std::string_view>{}(id);
}
uint32_t TagOf(size_t hash) {
  return static_cast<uint32_t>(hash >> 32) | 1;
}
}  // namespace

size_t DormantTasks::Probe(std::string_view id, size_t hash) const {
  const size_t mask = table_.size() - 1;
  const uint32_t tag = TagOf(hash);
  for (size_t at = hash & mask;; at = (at + 1) & mask) {
    const Place& p = table_[at];
    if (p.slot == 0 || (p.tag == tag && IdOf(slots_[p.slot - 1]) == id)) return at;
  }
}

void DormantTasks::Add(std::string_view id, Entry entry) {
  if (id.size() > UINT16_MAX || ids_.size() + id.size() > UINT32_MAX || slots_.size() >= UINT32_MAX - 1) {
    throw std::length_error("too many dormant tasks, or an id too long");
  }
  Slot s;
  s.at = static_cast<uint32_t>(ids_.size());
  s.length = static_cast<uint16_t>(id.size());
  s.entry = entry;
  s.popped = entry.wall_deadline == 0;  // in no heap
  std::memcpy(ids_.Room(id.size()), id.data(), id.size());
  ids_.Commit(id.size());
  slots_.push_back(s);
  ++live_;
}

void DormantTasks::Seal() {
  Index();
  Heap();
}

void DormantTasks::Index() {
  // At most half full: a miss ends at an empty place soon.
  size_t size = 64;
  while (size < 2 * (live_ + 1)) size *= 2;
  table_.assign(size, Place{});
  for (uint32_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (s.taken) continue;
    const std::string_view id = IdOf(s);
    const size_t hash = HashOf(id);
    Place& p = table_[Probe(id, hash)];
    if (p.slot != 0) {  // a second entry of the id: the first stays
      s.taken = true;
      --live_;
      continue;
    }
    p = Place{i + 1, TagOf(hash)};
  }
}

void DormantTasks::Heap() {
  wakes_ = GrowArray<Wake>();
  waking_ = 0;
  for (uint32_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (s.taken || s.popped) continue;
    wakes_.push_back(Wake{s.entry.wall_deadline - kLeadNs, i});
    ++waking_;
  }
  std::make_heap(wakes_.data(), wakes_.data() + wakes_.size(), kLater);
}

const DormantTasks::Entry* DormantTasks::Find(std::string_view id) const {
  if (live_ == 0 || table_.empty()) return nullptr;
  const Place& p = table_[Probe(id, HashOf(id))];
  return p.slot == 0 || slots_[p.slot - 1].taken ? nullptr : &slots_[p.slot - 1].entry;
}

bool DormantTasks::Take(std::string_view id) {
  if (live_ == 0 || table_.empty()) return false;
  const Place& p = table_[Probe(id, HashOf(id))];
  if (p.slot == 0 || slots_[p.slot - 1].taken) return false;
  Slot& slot = slots_[p.slot - 1];
  slot.taken = true;  // its place stays: other ids' probes pass over it
  if (!slot.popped) --waking_;
  --live_;
  if (live_ == 0) {
    Clear();
  } else if (slots_.size() >= 1024 && live_ < slots_.size() / 4) {
    Compact();
  }
  return true;
}

void DormantTasks::Compact() {
  GrowArray<char> ids;
  GrowArray<Slot> slots;
  slots.reserve(live_);
  for (uint32_t i = 0; i < slots_.size(); ++i) {
    Slot s = slots_[i];
    if (s.taken) continue;
    const std::string_view id = IdOf(s);
    s.at = static_cast<uint32_t>(ids.size());
    std::memcpy(ids.Room(id.size()), id.data(), id.size());
    ids.Commit(id.size());
    slots.push_back(s);
  }
  ids_ = std::move(ids);
  slots_ = std::move(slots);
  Seal();
}

void DormantTasks::Clear() {
  ids_ = GrowArray<char>();
  slots_ = GrowArray<Slot>();
  wakes_ = GrowArray<Wake>();
  table_ = {};
  live_ = 0;
  waking_ = 0;
}

void DormantTasks::DropStale() {
  while (!wakes_.empty() && slots_[wakes_.front().slot].taken) {
    std::pop_heap(wakes_.data(), wakes_.data() + wakes_.size(), kLater);
    wakes_.pop_back();
  }
}

std::optional<std::string> DormantTasks::PopDue(int64_t wall_now) {
  DropStale();
  if (waking_ == 0 || wakes_.front().wall > wall_now) return std::nullopt;
  Slot& s = slots_[wakes_.front().slot];
  std::pop_heap(wakes_.data(), wakes_.data() + wakes_.size(), kLater);
  wakes_.pop_back();
  s.popped = true;
  --waking_;
  return std::string(IdOf(s));
}

void DormantTasks::ForEach(const std::function<void(std::string_view id, const Entry& e)>& visit) const {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i].taken) visit(IdOf(slots_[i]), slots_[i].entry);
  }
}

}  // namespace lua_tasks
