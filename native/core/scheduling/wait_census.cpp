// SPDX-License-Identifier: MIT
// WaitCensus: the live tasks counted by what they wait on, and the longest wait, taken when asked.
#include "core/scheduling/wait_census.hpp"

#include "core/scheduling/task.hpp"

namespace lua_tasks {

WaitCensus TakeWaitCensus(const TaskTable& tasks) {
  WaitCensus c;
  tasks.ForEach([&c](const Task& t) {
    if (t.ended()) return;
    const WaitKind kind = t.current_wait();
    ++c.waiting[static_cast<size_t>(kind)];
    if (kind == WaitKind::kNone) return;
    if (!c.any_waiting || t.wait_start < c.oldest_wait_start) c.oldest_wait_start = t.wait_start;
    c.any_waiting = true;
  });
  return c;
}

}  // namespace lua_tasks
