// SPDX-License-Identifier: MIT
// WaitCensus: the live tasks counted by what they wait on, and the longest wait, taken when asked.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "core/scheduling/task_table.hpp"
#include "core/scheduling/yield_instruction.hpp"

namespace lua_tasks {

// WaitKind's codes run 0 .. kRestore: the census has a slot for each.
inline constexpr size_t kWaitKindSlots = static_cast<size_t>(WaitKind::kRestore) + 1;

// Counted by one pass over the task table, only when someone asks (a
// metrics reader's collection): the scheduler keeps no counts as tasks park
// and wake, so its hot paths pay nothing for it.
struct WaitCensus {
  std::array<uint32_t, kWaitKindSlots> waiting{};  // by WaitKind code; kNone's slot holds the running tasks
  bool any_waiting = false;
  int64_t oldest_wait_start = 0;  // monotonic ns the longest current wait began (when any_waiting)
};

// Ended tasks still winding down (in the table while their end is told)
// are not counted: they are no longer live.
WaitCensus TakeWaitCensus(const TaskTable& tasks);

}  // namespace lua_tasks
