// SPDX-License-Identifier: MIT
// Task codes: the numbers that carry a task's state and end across to lib/.
#pragma once

#include <cstdint>

#include "task.hpp"

namespace lua_tasks {

// What the JS listener onEnd(owner, key, kind, value) hears: a task's end,
// or a Lua callback that failed with no task to fail (key 0).
enum class EndKind : int32_t {
  kDone,
  kFailed,  // its error, a timeout among them, or a result that could not cross
  kCancelled,
  kCallbackFailed,  // not a task: a Lua function JS called from the loop
};

// A task end as the listener hears it: a timeout is a failure (its error says so).
inline EndKind EndKindOf(TaskEnd end) {
  switch (end) {
    case TaskEnd::kDone:
      return EndKind::kDone;
    case TaskEnd::kCancelled:
      return EndKind::kCancelled;
    case TaskEnd::kFailed:
    case TaskEnd::kTimedOut:
      break;
  }
  return EndKind::kFailed;
}

}  // namespace lua_tasks
