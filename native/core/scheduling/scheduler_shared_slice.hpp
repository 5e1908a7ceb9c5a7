// SPDX-License-Identifier: MIT
// Scheduler::SharedSlice: several tasks run back to back outside any window share one time slice.
#pragma once

#include "core/scheduling/scheduler.hpp"

namespace lua_tasks {

// Work that runs several tasks back to back outside any window (the waiters
// of a task that ended, starts a COMMIT held back) shares one slice: each
// task still has its own budget (no deadline is shared: a slow waiter
// cannot get an innocent one killed), but once the slice is used the rest
// are preempted at their first hook, as if they had yielded. With a slice
// each, a task's end would wake its 1,000 waiters for 5 s (timeSlice 5).
class Scheduler::SharedSlice {
 public:
  explicit SharedSlice(Scheduler* s)
      : budget_(s->host_->budget()), open_(budget_ != nullptr && !budget_->active() && budget_->slice_ns() > 0) {
    if (open_) outer_ = budget_->OpenShared(s->clock_->MonoNs());
  }
  ~SharedSlice() {
    if (!open_) return;
    bool killed;
    budget_->Close(outer_, &killed);
  }
  SharedSlice(const SharedSlice&) = delete;
  SharedSlice& operator=(const SharedSlice&) = delete;

 private:
  CpuBudget* budget_;
  bool open_;
  CpuBudget::Window outer_;
};

}  // namespace lua_tasks
