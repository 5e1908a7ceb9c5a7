// SPDX-License-Identifier: MIT
// DormantTasks: the durable tasks Runtime.open left in the store, known by id until something needs them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/grow_array.hpp"
#include "core/scheduling/yield_instruction.hpp"

namespace lua_tasks {

// A dormant task waits in the store, not in memory: its journal is read
// and replayed (it is activated) when its deadline nears, or when anything
// names it (a resume, a message, a cancel, a join, its idempotency key).
// Until then it costs an entry here (docs/durable.md#restore-at-open).
//
// Flat: a million of them is one block of ids, one array of entries and one
// open-addressed table, built once when they are all in (Seal), with no
// allocation a task and no copy as they grow (GrowArray).
class DormantTasks {
 public:
  struct Entry {
    WaitKind kind = WaitKind::kNone;
    int64_t wall_deadline = 0;  // wall ns its wait ends (0: none)
  };
  // How long before its deadline a dormant task is activated: its replay
  // then arms its own timer, which fires on time.
  static constexpr int64_t kLeadNs = 1'000'000'000;

  // Runtime.open files its dormant tasks with Add, then Seal makes them
  // findable and orders their wakes. Of two entries of one id, the first
  // stays.
  void Add(std::string_view id, Entry entry);
  void Seal();
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
  int64_t NextWake() const { return wakes_.front().wall; }
  // The id of a task due by `wall_now` (it stays dormant until taken), or
  // nullopt.
  std::optional<std::string> PopDue(int64_t wall_now);

  // Every dormant task, in no order.
  void ForEach(const std::function<void(std::string_view id, const Entry& e)>& visit) const;

 private:
  struct Slot {
    uint32_t at = 0;  // its id in ids_
    uint16_t length = 0;
    bool taken = false;   // activated (or a second entry of its id): kept until the next compaction
    bool popped = false;  // its wake left the heap (or it had none)
    Entry entry;
  };
  // A place of the table: a slot's index + 1 (0: empty), and its hash's high
  // bits, which turn most other ids away without reading them.
  struct Place {
    uint32_t slot = 0;
    uint32_t tag = 0;
  };
  struct Wake {
    int64_t wall = 0;
    uint32_t slot = 0;
  };
  GrowArray<char> ids_;    // every id, one after another
  GrowArray<Slot> slots_;  // in the order added
  std::vector<Place> table_;
  GrowArray<Wake> wakes_;  // a min-heap by wall
  size_t live_ = 0;
  size_t waking_ = 0;  // wakes in the heap of tasks not taken: what keeps the loop's timer

  std::string_view IdOf(const Slot& s) const { return {ids_.data() + s.at, s.length}; }
  // The place of `id` in the table: its slot's, or the empty one it would take.
  size_t Probe(std::string_view id, size_t hash) const;
  // (Re)builds the table of the slots not taken (a second entry of an id is taken at once).
  void Index();
  void Heap();
  void DropStale();
  // Drops the taken slots once they are most of them (a long-lived runtime
  // activates its dormant tasks one by one).
  void Compact();
  void Clear();
};

}  // namespace lua_tasks
