// SPDX-License-Identifier: MIT
// KeptEnds: the end records of the latest durable tasks that ended (see kept_ends.hpp).
#include "core/durable/kept_ends.hpp"

namespace lua_tasks {

void KeptEnds::Put(uint64_t key, std::string payload) {
  if (payload.size() > kMaxBytes / 16) {
    Erase(key);
    return;
  }
  // One lookup, not an erase and then an insert: every durable end puts
  // one, and each lookup in a table of 100,000 is a cache miss.
  auto [it, fresh] = ends_.try_emplace(key);
  if (!fresh) bytes_ -= it->second.size();
  bytes_ += payload.size();
  it->second = std::move(payload);
  order_.push_back(key);
  Trim();
}

const std::string* KeptEnds::Find(uint64_t key) const {
  auto it = ends_.find(key);
  return it == ends_.end() ? nullptr : &it->second;
}

void KeptEnds::Erase(uint64_t key) {
  auto it = ends_.find(key);
  if (it == ends_.end()) return;
  bytes_ -= it->second.size();
  ends_.erase(it);
}

void KeptEnds::Trim() {
  // order_ may hold keys erased (or kept again) since: it is cut down to the
  // kept ones whenever it grows past twice their count.
  while (!order_.empty() && (ends_.size() > kMaxCount || bytes_ > kMaxBytes)) {
    Erase(order_.front());
    order_.pop_front();
  }
  if (order_.size() > 2 * ends_.size() + 64) {
    std::deque<uint64_t> kept;
    std::unordered_map<uint64_t, bool> seen;
    for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
      if (ends_.count(*it) != 0 && seen.emplace(*it, true).second) kept.push_front(*it);
    }
    order_ = std::move(kept);
  }
}

}  // namespace lua_tasks
