// SPDX-License-Identifier: MIT
// Task: one Lua coroutine run by the scheduler, and its single pending wait.
#include "core/scheduling/task.hpp"

#include <new>

#if LUA_TASKS_HAVE_MIMALLOC
#include <mimalloc.h>
#endif

namespace lua_tasks {

#if LUA_TASKS_HAVE_MIMALLOC
void* Task::operator new(size_t size) {
  void* p = mi_malloc(size);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void Task::operator delete(void* p) noexcept {
  mi_free(p);
}
#endif

const char* TaskStatusName(TaskStatus s) {
  switch (s) {
    case TaskStatus::kRunning:
      return "running";
    case TaskStatus::kWaiting:
      return "waiting";
    case TaskStatus::kDone:
      return "done";
    case TaskStatus::kFailed:
      return "failed";
    case TaskStatus::kCancelled:
      return "cancelled";
  }
  return "running";
}

}  // namespace lua_tasks
