// SPDX-License-Identifier: MIT
#include "core/durable/activations.hpp"

#include <utility>

namespace lua_tasks {

Activations::Answer Activations::Activation::Resume() {
  if (cancelled || resumed || !IsResumable(entry.kind)) return Answer::kRefused;
  resumed = true;
  return Answer::kLater;
}

Activations::Answer Activations::Activation::Send(uint32_t limit) {
  if (cancelled) return Answer::kRefused;
  if (sends >= limit) return Answer::kFull;
  ++sends;
  return Answer::kLater;
}

Activations::Answer Activations::Activation::Cancel() {
  if (cancelled) return Answer::kRefused;
  cancelled = true;
  return Answer::kLater;
}

bool Activations::Begin(std::string_view id, DormantTasks::Entry entry) {
  return map_.try_emplace(std::string(id), Activation{entry, {}, false, false, 0}).second;
}

Activations::Activation* Activations::Find(std::string_view id) {
  if (map_.empty()) return nullptr;
  auto it = map_.find(id);
  return it == map_.end() ? nullptr : &it->second;
}

const Activations::Activation* Activations::Find(std::string_view id) const {
  if (map_.empty()) return nullptr;
  auto it = map_.find(id);
  return it == map_.end() ? nullptr : &it->second;
}

std::vector<uint64_t> Activations::End(std::string_view id) {
  auto it = map_.find(id);
  if (it == map_.end()) return {};
  std::vector<uint64_t> waiters = std::move(it->second.waiters);
  map_.erase(it);
  return waiters;
}

void Activations::ForEach(const std::function<void(std::string_view id, const DormantTasks::Entry& e)>& visit) const {
  for (const auto& [id, a] : map_) visit(id, a.entry);
}

}  // namespace lua_tasks
