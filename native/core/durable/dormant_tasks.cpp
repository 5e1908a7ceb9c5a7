// SPDX-License-Identifier: MIT
#include "core/durable/dormant_tasks.hpp"

#include <algorithm>

namespace lua_tasks {

namespace {
bool Later(const std::pair<int64_t, std::string>& a, const std::pair<int64_t, std::string>& b) {
  return a.first > b.first;
}
}  // namespace

void DormantTasks::Add(std::string id, Entry entry) {
  if (entry.wall_deadline != 0) {
    wakes_.emplace_back(entry.wall_deadline - kLeadNs, id);
    std::push_heap(wakes_.begin(), wakes_.end(), Later);
  }
  tasks_.insert_or_assign(std::move(id), entry);
}

const DormantTasks::Entry* DormantTasks::Find(std::string_view id) const {
  if (tasks_.empty()) return nullptr;
  auto it = tasks_.find(id);
  return it == tasks_.end() ? nullptr : &it->second;
}

bool DormantTasks::Take(std::string_view id) {
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return false;
  tasks_.erase(it);
  if (tasks_.empty()) wakes_.clear();
  return true;
}

void DormantTasks::DropStale() {
  while (!wakes_.empty()) {
    const auto& [wake, id] = wakes_.front();
    const Entry* e = Find(id);
    if (e != nullptr && e->wall_deadline - kLeadNs == wake) return;
    std::pop_heap(wakes_.begin(), wakes_.end(), Later);
    wakes_.pop_back();
  }
}

std::optional<std::string> DormantTasks::PopDue(int64_t wall_now) {
  DropStale();
  if (wakes_.empty() || wakes_.front().first > wall_now) return std::nullopt;
  std::pop_heap(wakes_.begin(), wakes_.end(), Later);
  std::string id = std::move(wakes_.back().second);
  wakes_.pop_back();
  return id;
}

void DormantTasks::ForEach(const std::function<void(const std::string& id, const Entry& e)>& visit) const {
  for (const auto& [id, e] : tasks_) visit(id, e);
}

}  // namespace lua_tasks
