// SPDX-License-Identifier: MIT
#include "core/durable/dormant_tasks.hpp"

#include <algorithm>

namespace lua_tasks {

namespace {
// The heap's order: the earliest wake on top.
constexpr auto kLater = [](const auto& a, const auto& b) { return a.first > b.first; };
}  // namespace

void DormantTasks::AddAll(std::vector<std::pair<std::string, Entry>> tasks) {
  tasks_.reserve(tasks_.size() + tasks.size());
  const size_t heaped = wakes_.size();
  for (auto& [id, entry] : tasks) {
    auto [it, inserted] = tasks_.try_emplace(std::move(id));
    if (!inserted) continue;  // known already (a runtime adds its dormant tasks once, at open)
    it->second.entry = entry;
    ++live_;
    if (entry.wall_deadline != 0) {
      wakes_.emplace_back(entry.wall_deadline - kLeadNs, &*it);
      ++waking_;
    } else {
      it->second.popped = true;  // in no heap
    }
  }
  if (wakes_.size() - heaped > 1) {
    std::make_heap(wakes_.begin(), wakes_.end(), kLater);
  } else if (wakes_.size() > heaped) {
    std::push_heap(wakes_.begin(), wakes_.end(), kLater);
  }
}

const DormantTasks::Entry* DormantTasks::Find(std::string_view id) const {
  if (live_ == 0) return nullptr;
  auto it = tasks_.find(id);
  return it == tasks_.end() || it->second.taken ? nullptr : &it->second.entry;
}

bool DormantTasks::Take(std::string_view id) {
  auto it = tasks_.find(id);
  if (it == tasks_.end() || it->second.taken) return false;
  --live_;
  if (live_ == 0) {
    Clear();
  } else if (it->second.popped) {
    tasks_.erase(it);
  } else {
    it->second.taken = true;  // erased when its wake comes to the top
    --waking_;
  }
  return true;
}

void DormantTasks::Clear() {
  tasks_.clear();
  wakes_.clear();
  live_ = 0;
  waking_ = 0;
}

void DormantTasks::DropStale() {
  while (!wakes_.empty() && wakes_.front().second->second.taken) {
    Map::value_type* task = wakes_.front().second;
    std::pop_heap(wakes_.begin(), wakes_.end(), kLater);
    wakes_.pop_back();
    tasks_.erase(task->first);
  }
}

std::optional<std::string> DormantTasks::PopDue(int64_t wall_now) {
  DropStale();
  if (waking_ == 0 || wakes_.front().first > wall_now) return std::nullopt;
  Map::value_type* task = wakes_.front().second;
  std::pop_heap(wakes_.begin(), wakes_.end(), kLater);
  wakes_.pop_back();
  task->second.popped = true;
  --waking_;
  return task->first;
}

void DormantTasks::ForEach(const std::function<void(const std::string& id, const Entry& e)>& visit) const {
  for (const auto& [id, held] : tasks_) {
    if (!held.taken) visit(id, held.entry);
  }
}

}  // namespace lua_tasks
