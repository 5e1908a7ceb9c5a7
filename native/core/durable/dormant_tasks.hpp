// SPDX-License-Identifier: MIT
// DormantTasks: the durable tasks Runtime.open left in the store, known by id until something needs them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/scheduling/yield_instruction.hpp"

namespace lua_tasks {

// A dormant task waits in the store, not in memory: its journal is read
// and replayed (it is activated) when its deadline nears, or when anything
// names it (a resume, a message, a cancel, a join, its idempotency key).
// Until then it costs an entry here (docs/durable.md#restore-at-open).
class DormantTasks {
 public:
  struct Entry {
    WaitKind kind = WaitKind::kNone;
    int64_t wall_deadline = 0;  // wall ns its wait ends (0: none)
  };
  // How long before its deadline a dormant task is activated: its replay
  // then arms its own timer, which fires on time.
  static constexpr int64_t kLeadNs = 1'000'000'000;

  void Add(std::string id, Entry entry);
  const Entry* Find(std::string_view id) const;
  bool Contains(std::string_view id) const { return Find(id) != nullptr; }
  // Forgets `id` (it is being activated); false if it was not dormant.
  bool Take(std::string_view id);
  size_t size() const { return tasks_.size(); }
  bool empty() const { return tasks_.empty(); }

  // Whether some dormant task has a deadline, and the wall time the
  // earliest is due to be activated (an entry of a task taken since may
  // answer: its wake then finds nothing due).
  bool HasWakes() const { return !wakes_.empty(); }
  int64_t NextWake() const { return wakes_.front().first; }
  // The id of a task due by `wall_now` (it stays dormant until taken), or
  // nullopt.
  std::optional<std::string> PopDue(int64_t wall_now);

  // Every dormant task, in no order.
  void ForEach(const std::function<void(const std::string& id, const Entry& e)>& visit) const;

 private:
  struct IdHash {
    using is_transparent = void;
    size_t operator()(std::string_view id) const { return std::hash<std::string_view>{}(id); }
  };
  std::unordered_map<std::string, Entry, IdHash, std::equal_to<>> tasks_;
  // (wake, id), a min-heap; an entry whose task was taken goes when it
  // comes to the top.
  std::vector<std::pair<int64_t, std::string>> wakes_;
  void DropStale();
};

}  // namespace lua_tasks
