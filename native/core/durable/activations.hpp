// SPDX-License-Identifier: MIT
// Activations: dormant durable tasks being read from a store that reads asynchronously, and what waits for each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/durable/dormant_tasks.hpp"
#include "core/scheduling/yield_instruction.hpp"

namespace lua_tasks {

// A store read asynchronously (PostgreSQL) cannot hand a dormant task's
// journal over inside the call that names the task. Between the call and
// the read's end the task is here: it answers as a dormant task does (its
// wait, from its index entry), a Lua caller waits for it (WaitKind::kRestore)
// and then makes its call again, and the embedder holds its own calls back
// (docs/durable.md#restore-at-open).
class Activations {
 public:
  // What the embedder's call on a task being read answers; the call itself
  // is made once the task is restored (kLater).
  enum class Answer { kRefused, kLater, kFull };

  struct Activation {
    DormantTasks::Entry entry;      // what its index entry said
    std::vector<uint64_t> waiters;  // keys of the tasks waiting for it
    bool resumed = false;           // the embedder answered a resume for it
    bool cancelled = false;         // the embedder answered a cancel for it
    uint32_t sends = 0;             // messages the embedder sent it meanwhile: at most its mailbox's limit

    // rt.resume: only the first, and only if its wait takes a resume (the
    // task will have moved on from it by a second).
    Answer Resume();
    // rt.send: as many as its mailbox holds (`limit`), held meanwhile.
    Answer Send(uint32_t limit);
    // rt.cancel: the first; every call after it is refused.
    Answer Cancel();
  };

  // `id` is now being read; false (nothing changed) if it already was.
  bool Begin(std::string_view id, DormantTasks::Entry entry);
  Activation* Find(std::string_view id);
  const Activation* Find(std::string_view id) const;
  // The read ended (the task started, or could not be restored): the keys
  // of the tasks that waited.
  std::vector<uint64_t> End(std::string_view id);
  void ForEach(const std::function<void(std::string_view id, const DormantTasks::Entry& e)>& visit) const;
  size_t size() const { return map_.size(); }
  bool empty() const { return map_.empty(); }

 private:
  struct IdHash {
    using is_transparent = void;
    size_t operator()(std::string_view id) const { return std::hash<std::string_view>{}(id); }
  };
  std::unordered_map<std::string, Activation, IdHash, std::equal_to<>> map_;
};

}  // namespace lua_tasks
