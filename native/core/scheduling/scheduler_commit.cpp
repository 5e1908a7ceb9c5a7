// SPDX-License-Identifier: MIT
// The scheduler's snapshot lock: a COMMIT's outcome, and what the lock held back (see Scheduler::Lock).
#include <utility>

#include "core/durable/replayer.hpp"
#include "core/scheduling/scheduler.hpp"
#include "core/scheduling/scheduler_shared_slice.hpp"

namespace lua_tasks {

void Scheduler::FinishCommit(Task* t, int nargs) {
  if (t->durable && replayer_->OnWritten(t, nargs)) {  // a durable wait's record: t waits now
    hooks_->OnScheduleChange();
    return;
  }
  // The committer continues through the ready queue, never here: continuing
  // here, a loop of COMMITs ran ahead of everything else.
  ClearWait(t);
  Continue(t, nargs);
  hooks_->OnScheduleChange();
}

void Scheduler::Unlock() {
  if (locks_ > 0 && --locks_ == 0) {
    Unlocked();
  } else {
    hooks_->OnScheduleChange();
  }
}

// Runs what the lock held back, in the order it became ready: the deferred
// starts, resumes and deliveries, then the timers that came due; the ready
// queue (with the committers at its back) follows in the check phase. Any of
// them may COMMIT, and the embedder's snapshot lock then holds the rest until
// it lets go.
void Scheduler::Unlocked() {
  // The embedder may lock and unlock from inside this work (a COMMIT whose
  // snapshot is taken at once): the outer call goes on with the deferred
  // work, in order, instead of nesting one level per task.
  if (unlocking_) return;
  struct Flag {
    bool& f;
    explicit Flag(bool& b) : f(b) { f = true; }
    ~Flag() { f = false; }
  } flag(unlocking_);
  RunDeferred();
  // Inside a batch (which goes on with the due timers itself, or leaves them
  // to the timer phase that precedes the next check) or inside host code or
  // Lua (an rt.start whose COMMIT failed at once), timers run where they
  // belong, not nested here.
  if (locks_ == 0 && batch_ == 0 && !host_->busy() && !timers_.empty() && timers_.NextDeadline() <= clock_->MonoNs()) {
    RunTimers();
  }
  hooks_->OnScheduleChange();
}

void Scheduler::RunDeferred() {
  // Back to back, but with one slice between them all: 200 spinners started
  // while a COMMIT held the lock, each with a slice of its own, held the
  // loop for 200 slices.
  SharedSlice slice(this);
  while (locks_ == 0 && !deferred_.empty()) {
    const Deferred d = deferred_.front();
    deferred_.pop_front();
    Task* t = FindLive(d.key);
    if (t == nullptr || t->gen != d.gen || t->status != TaskStatus::kWaiting || t->wait != WaitKind::kNone) continue;
    RunTask(t, host_->current(), d.nargs);
  }
}

}  // namespace lua_tasks
