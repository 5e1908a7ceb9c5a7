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

  // Runtime.open's dormant tasks, at once: one reserve, one heap build. An
  // id known already keeps its first entry.
  void AddAll(std::vector<std::pair<std::string, Entry>> tasks);
  const Entry* Find(std::string_view id) const;
  bool Contains(std::string_view id) const { return Find(id) != nullptr; }
  // Forgets `id` (it is being activated); false if it was not dormant.
  bool Take(std::string_view id);
  size_t size() const { return live_; }
  bool empty() const { return live_ == 0; }

  // Whether some dormant task has a deadline, and the wall time the
  // earliest is due to be activated (an entry of a task taken since may
  // answer: its wake then finds nothing due).
  bool HasWakes() const { return waking_ > 0; }
  int64_t NextWake() const { return wakes_.front().first; }
  // The id of a task due by `wall_now` (it stays dormant until taken), or
  // nullopt.
  std::optional<std::string> PopDue(int64_t wall_now);

  // Every dormant task, in no order.
  void ForEach(const std::function<void(const std::string& id, const Entry& e)>& visit) const;

 private:
  struct Held {
    Entry entry;
    bool taken = false;   // activated, its wake still in the heap
    bool popped = false;  // its wake left the heap
  };
  struct IdHash {
    using is_transparent = void;
    size_t operator()(std::string_view id) const { return std::hash<std::string_view>{}(id); }
  };
  using Map = std::unordered_map<std::string, Held, IdHash, std::equal_to<>>;
  // Node-based: an element's address holds until it is erased, so the
  // heap points at it rather than keeping a second copy of its id.
  Map tasks_;
  // (wake, its task), a min-heap; a task taken meanwhile goes when its
  // entry comes to the top.
  std::vector<std::pair<int64_t, Map::value_type*>> wakes_;
  size_t live_ = 0;
  size_t waking_ = 0;  // wakes in the heap of tasks not taken: what keeps the loop's timer
  void DropStale();
  void Clear();
};

}  // namespace lua_tasks
