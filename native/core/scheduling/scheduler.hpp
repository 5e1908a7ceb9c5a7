// SPDX-License-Identifier: MIT
// Scheduler: Lua coroutines run as tasks that wait on a timer queue and a ready queue.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <lua.hpp>

#include "core/base/clock.hpp"
#include "core/base/ring_queue.hpp"
#include "core/cron/cron_schedule.hpp"
#include "core/host/lua_host.hpp"
#include "core/host/lua_ref.hpp"
#include "core/scheduling/recent_results.hpp"
#include "core/scheduling/task.hpp"
#include "core/scheduling/task_table.hpp"
#include "core/scheduling/thread_anchors.hpp"
#include "core/scheduling/timer_queue.hpp"
#include "core/scheduling/yield_instruction.hpp"
#include "core/store/persist_limits.hpp"

namespace lua_tasks {

class Replayer;
struct DurableStart;

// What the embedder (the addon, or a test) supplies.
class SchedulerHooks {
 public:
  virtual ~SchedulerHooks() = default;
  // A task ended (see TaskEnding for what co's stack holds). Called for
  // observed tasks and for every failure (kFailed, kTimedOut).
  virtual void OnTaskEnd(Task& task, lua_State* co, const TaskEnding& end) = 0;
  // The next deadline or the ready queue changed: re-arm the loop.
  virtual void OnScheduleChange() = 0;
  // A task yielded COMMIT: write the state, then call FinishCommit with
  // (true) or (false, error) pushed onto task.co. The task waits meanwhile;
  // the others run (the embedder locks only while it takes the snapshot).
  // May call FinishCommit before it returns (a snapshot that cannot be
  // taken).
  virtual void OnCommit(Task& task) = 0;
  // Durable tasks wrote journal records that no write has taken yet (called
  // once until Replayer::TakeWrites): the embedder writes them soon.
  virtual void OnJournal() {}
  // A dormant durable task is needed (named by id, or its deadline nears):
  // the embedder reads its journal and starts it (Start with a
  // DurableStart), taking it out of Replayer::dormant(), before it returns.
  // Also asked for an id of task form that no task answers to: a durable
  // task that Runtime.open restores but has not started yet (a joiner
  // replayed before the task it joins) is started then; for any other id it
  // does nothing. With Replayer::async_reads(), the task is among the
  // Replayer's activations() instead, and the embedder only starts the read
  // (it must not run Lua here): it starts the task when the read ends, then
  // calls Replayer::Activated.
  virtual void OnActivate(const std::string& id) {}

  // Async context: the embedder's notion of whose work a call is (Node's
  // AsyncLocalStorage), opaque here: a number other than 0 in
  // Task::context, so that what a task calls on the embedder's side after
  // any wait runs in the context it was started in. Most tasks end within
  // their first run, which runs inside the starter's call anyway, so a task
  // gets one only once it outlives that run: CaptureContext is called right
  // after the first run parks (still inside the starter's call), or at once
  // for a start the snapshot lock defers. `by_lua`: the task was started by Lua
  // code, not by the embedder itself; the embedder may give every such task
  // of one LuaHost entry the same context. A task that a running task starts
  // from Lua shares the starter's instead (captured for the starter first if
  // it is in its first run, and given one more reference by RetainContext),
  // unless SharesContext(starter) says no: the embedder knows when the Lua
  // starting it is not the starter's own but code the embedder runs from a
  // call the starter made. Each reference a task holds is given back through
  // ReleaseContext when it ends.
  virtual uint32_t CaptureContext(bool by_lua) { return 0; }
  virtual bool SharesContext(const Task& starter) { return true; }
  virtual void RetainContext(uint32_t context) {}
  virtual void ReleaseContext(uint32_t context) {}
};

// How it works. Tasks live in `tasks_` by key. A task runs (lua_resume) until
// it yields; coroutine.yield and the tasks API (lua_api_yield.cpp, lua_api_tasks.cpp) have then
// already recorded its instruction (Task::Pend), so the scheduler only
// files the task: IMMEDIATE into `ready_`, timed waits into `timers_`,
// INDEFINITELY nowhere. The embedder drives RunImmediate from the loop's
// check phase and RunTimers from its single timer. Queue entries carry the
// task's `gen`, so an entry left behind by a resume or cancel is skipped.
//
// Continuations re-enter through the loop (docs/design.md#persistence). A task woken from
// outside the loop's phases, by a promise or a finished COMMIT, would
// otherwise run inside the microtask that settled it, and a task that awaits
// or commits again at once would be settled and run again there: 200,000
// instant COMMITs held Node's loop for 740 ms, an endless loop of them for
// ever. So a COMMIT's outcome always waits in the ready queue (an
// entry that carries the values, see ReadyEntry); a promise's runs at once
// only while this loop turn's chain of such runs is younger than
// kDirectChainNs, and waits in the ready queue after that.
class Scheduler {
 public:
  Scheduler(LuaHost* host, const Clock* clock, SchedulerHooks* hooks);
  ~Scheduler();  // frees every task's registry slot: destroy before the state
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Keeps "SCHEDULER" and the unit names in the registry, so a wake pushes
  // them by index instead of hashing them, and makes the table that anchors
  // task threads. Raises (memory): call in protected mode (RegisterLuaApi
  // does).
  void CacheNames(lua_State* L);
  const YieldNames* yield_names() const { return &yield_names_; }

  // Why Start refused.
  enum class StartError {
    kNotStartable,  // neither a function nor a coroutine that has not started
    kNoStackRoom,   // the coroutine's stack cannot take the arguments (memory)
    kMainThread,    // the runtime's main thread: never a task
  };
  // Starts a task. Stack of L: [fn_or_thread, args...] (nargs args); pops
  // them. Runs it now until its first wait. Returns its key, or 0 with
  // *error (when given) saying why. With `durable` (its contents taken), a durable
  // task: its journal is written, or replayed (docs/durable.md).
  uint64_t Start(lua_State* L, int nargs, bool observed, StartError* error = nullptr, DurableStart* durable = nullptr);

  // kNoStackRoom: its stack cannot take that many more values (its use plus
  // nargs past Lua's limit of about a million, or memory).
  enum class ResumeResult { kResumed, kNotFound, kNotResumable, kSelf, kNoStackRoom };
  // Resumes a waiting task with the `nargs` values on top of `from` (popped
  // in every case), running it until its next wait.
  ResumeResult Resume(uint64_t key, lua_State* from, int nargs);

  // Queues the `nargs` values on top of `from` (popped in every case) as one
  // message for task `key`, whatever it is doing (running, waiting on
  // anything, committing): kQueued; kNotFound for an unknown or ended task;
  // kFull when it already holds mailbox_limit() messages. A task waiting in
  // tasks.receive is queued to run (at the back of the ready queue, as a
  // COMMIT's outcome is), never run here: a send from JS or from another
  // task costs no nested run. `from` needs 2 free stack slots.
  // kNotPersistable: the task is durable and a value cannot persist (its
  // inbox keeps messages across restarts; last_send_error() says why).
  enum class SendResult { kQueued, kNotFound, kFull, kNotPersistable };
  const std::string& last_send_error() const { return last_send_error_; }
  SendResult Send(uint64_t key, lua_State* from, int nargs) { return Post(key, from, nargs, nullptr); }
  // Moves t's oldest message onto L (n values) and returns n; -1 if its
  // mailbox is empty; -2 if L has no room for the values (the message stays).
  int TakeMessage(Task* t, lua_State* L);
  // Messages a mailbox holds at most (the mailboxLimit option).
  static constexpr uint32_t kDefaultMailboxLimit = 1000;
  void set_mailbox_limit(uint32_t n) { mailbox_limit_ = n; }
  uint32_t mailbox_limit() const { return mailbox_limit_; }

  // Cancels a task: closes its coroutine (running its <close> variables).
  // A running task is killed at its next yield. Returns false if no such task.
  bool Cancel(uint64_t key);
  void CancelAll();

  void RunImmediate();  // one batch: the tasks ready when it starts
  void RunTimers();     // every timed wait that is due

  bool HasReady() const { return !ready_.empty(); }
  bool HasTimers() const { return !timers_.empty() || (replayer_ != nullptr && HasDormantWakes()); }
  // Tasks that something outside the loop's handles will wake (promises).
  bool HasOutsideWaits() const { return outside_waits_ != 0; }
  int64_t NextDeadline() const;                                          // monotonic ns; HasTimers() must be true
  size_t task_count() const { return tasks_.size() - part_of_.size(); }  // detached parts are not tasks
  uint64_t next_key() const { return next_key_; }                        // the key Start gives next
  size_t spare_count() const { return spare_.size(); }                   // ended Tasks kept for reuse
  static constexpr size_t kSpareKept = 1024;                             // beyond this, spares nobody names are freed
  // Live tasks at which the collector switches from generational to
  // incremental mode, for good (see Scheduler::NewTask).
  static constexpr size_t kIncrementalAt = 10000;
  // The incremental collector's step multiplier and log2 step size (bytes)
  // from the switch on (Lua's defaults: 100 and 13).
  static constexpr int kStepMul = 10;
  static constexpr int kStepSizeLog2 = 10;
  // A task that has not ended. An ended task stays in `tasks_` while EndTask
  // tells the embedder and wakes its joiners, but lookups by id answer for
  // it through FindFinished from then on: code run meanwhile (a listener, a
  // joiner) can neither cancel it again nor join a task that wakes no one.
  // A detached part is no task of its own: no id finds it.
  Task* Find(uint64_t key) {
    Task* t = tasks_.Find(key);
    return t != nullptr && !t->ended() && (t->family & Task::kPart) == 0 ? t : nullptr;
  }
  Task* current() const { return current_; }

  // ---- Detached parts (scheduler_parts.cpp; docs/design.md#detached-parts) ----
  // The task a part belongs to; t itself for a task. Its id, mailbox and CPU
  // budget are the part's too.
  Task* Owner(Task* t) const { return (t->family & Task::kPart) != 0 ? OwnerOfPart(t) : t; }
  // coroutine.resume from code of the running task (or of one of its parts)
  // got the sentinel of an API wait from the coroutine on top of L (popped):
  // its pending wait moves to a new part that the scheduler runs from now on,
  // and the resume returns at once. kDurable: the task is durable (a replay
  // could not tell its parts apart): nothing changed, the wait is still
  // pending on the running task. Call from a lua_CFunction under a HostSection.
  enum class DetachResult { kDetached, kDurable };
  DetachResult Detach(lua_State* L);
  // The task or part that a settlement of (key, token) wakes (the key and
  // token an await gave the embedder), or nullptr for a late one. A part
  // detached at a promise wait is found by the key it awaited under.
  Task* Awaiting(uint64_t key, uint32_t token);
  const Clock* clock() const { return clock_; }
  LuaHost* host() const { return host_; }
  const TaskTable& tasks() const { return tasks_; }

  // Task ids: "t<26 random base-36 digits>-<13 base-36 digits of the key>".
  // The prefix is random per scheduler (about 130 bits, like a UUID's 122),
  // so ids are unique across runtimes and restarts; the key is zero-padded,
  // so a runtime's ids sort in start order. And an id is 41 bytes: Lua
  // interns every string of 40 bytes or less, so a shorter id cost each
  // tasks.start a string-table lookup and insert, the table's doublings and,
  // once the id was dropped, its removal in a sweep: 20% of starting a
  // million tasks, and loop stalls of 10-35 ms among them (bench W7).
  static constexpr size_t kIdPrefixLength = 28;
  static constexpr size_t kIdKeyDigits = 13;  // 36^13 > 2^64
  static constexpr size_t kIdLength = kIdPrefixLength + kIdKeyDigits;
  std::string IdOf(uint64_t key) const;
  // When a waiting task's timed wait (FOR, UNTIL_TIME, UNTIL_NEXT, RECEIVE with a timeout) ends, in
  // wall-clock ns since the epoch, or nothing for any other wait. A FOR
  // deadline is monotonic: it is read against the wall clock now, so it moves
  // if the wall clock is set while the task waits (the wait itself does not).
  std::optional<int64_t> WaitEndsWallNs(const Task& t) const;
  // The wall clock was set by `by_ns` (the embedder changed its offset).
  // Forward, every wait on the wall clock (UNTIL_TIME, UNTIL_NEXT, a durable
  // task's FOR or receive timeout: Task::on_wall_clock) is re-armed by its
  // deadline (its timer would fire late by by_ns); back, nothing: a timer
  // that fires early re-arms itself (RunTimers). An ephemeral FOR measures
  // elapsed time on the monotonic clock and is not moved.
  void WallClockMoved(int64_t by_ns);
  // The same into buf, kIdLength bytes (no allocation: ids are pushed on
  // every tasks.start).
  size_t FormatId(uint64_t key, char* buf) const;
  bool ParseId(std::string_view id, uint64_t* key) const;
  // ParseId, and a dormant task's id (or an unknown id of task form: see
  // SchedulerHooks::OnActivate) activates it first: what every operation
  // on a task by id uses, except those that only look. With
  // Replayer::async_reads() a dormant task's read only starts: false.
  bool Resolve(std::string_view id, uint64_t* key);
  const std::string& id_prefix() const { return prefix_; }

  // Outcome of a task that ended recently (kept for tasks.wait / status).
  using Finished = FinishedTask;
  const Finished* FindFinished(uint64_t key) const;
  // The host could not take the ended task's results: it reports the task
  // failed from now on (Lua's tasks.wait and tasks.status still see it done).
  void MarkHostFailed(uint64_t key) {
    if (Finished* f = finished_.Find(key)) f->host_failed = true;
  }
  // Pushes f's results (done) or its error value (failed, cancelled) onto L;
  // returns how many. Raises (memory, stack): call from Lua-facing code.
  int PushFinished(const Finished& f, lua_State* L) const;
  static constexpr size_t kFinishedKept = 1024;

  // Files the task's pending instruction as its wait (after a yield); `now`
  // is the monotonic time.
  void Park(Task* t, int64_t now);
  // Wakes a task waiting on something the embedder owns (a promise) with the
  // `nargs` values already pushed onto t->co. It runs now, to its next wait,
  // unless the lock is held (then it is deferred, as a resume is) or this
  // loop turn's chain of direct runs is kDirectChainNs old by its latest park
  // (then it waits at the back of the ready queue, values kept): an await of
  // a settled promise costs no loop turn, yet a loop of them lets the loop
  // turn about every kDirectChainNs.
  void Deliver(Task* t, int nargs);
  static constexpr int64_t kDirectChainNs = 1'000'000;  // 1 ms
  static constexpr size_t kDueChunk = 256;              // due timers RunTimers takes at a time
  // The loop turned (polled for I/O): a new chain of direct runs may begin.
  void LoopTurned() { chain_start_ = -1; }

  // The snapshot lock (docs/design.md#persistence): the embedder holds it
  // while it takes a write's snapshot (tasks.state encoded in slices, the
  // keyed writes taken), so no task changes the state under it; it is let go
  // before the write's I/O, so the runtime's other tasks run meanwhile and
  // their COMMITs gather for the next write (group commit across tasks). A
  // committing task itself waits for its write but holds no lock. Locks
  // nest (Lock/Unlock). Meanwhile timers and IMMEDIATE batches wait, and
  // starts, resumes and promise deliveries are deferred, in order. When the
  // last lock goes (Unlocked), the handover is fair: the deferred ones run
  // at once, then the timers that came due (at once as well, when no task
  // or batch is on the stack), and committers, queued at the back of the
  // ready queue by FinishCommit, continue only after what was ready before
  // them. So two committing loops alternate, and a timer beside one is late
  // by about one snapshot at most. No Lua runs while any lock remains.
  void Lock() { ++locks_; }
  void Unlock();
  bool locked() const { return locks_ > 0; }
  // The zone of UNTIL_NEXT without an explicit one (timeZone option; null =
  // the process's zone, then UTC).
  void set_default_zone(const date::time_zone* z) { default_zone_ = z; }
  const date::time_zone* default_zone() const { return default_zone_; }

  // Whether COMMIT is available (the runtime has a store).
  void set_has_store(bool v) { has_store_ = v; }
  // What scripts may make this runtime persist (persist_limits.hpp).
  PersistLimits& persist_limits() { return persist_limits_; }
  const PersistLimits& persist_limits() const { return persist_limits_; }
  bool has_store() const { return has_store_; }
  // The write of t's COMMIT settled, with the `nargs` values ((true) or
  // (false, error)) pushed onto t->co: releases t's lock and queues t at the
  // back of the ready queue, to continue with those values (cancellable
  // meanwhile, not resumable by id). If no lock remains, runs Unlocked.
  // Never runs t itself.
  void FinishCommit(Task* t, int nargs);

  // ---- Durable tasks (durable/replayer.hpp; docs/durable.md) ----
  // The durable unit: nullptr until something durable is asked for (a store
  // that keeps journals, a durable start). A task with Task::durable set
  // always has one.
  Replayer* replayer() const { return replayer_.get(); }
  Replayer& EnsureReplayer();
  // Pushes onto L what a join of `key` gives once the task is not live:
  // (true, results...) or (false, error) for a task that ended (this run's
  // recent outcome, else a durable task's end record), else (nil, message)
  // for a task that is unknown. Returns the count; never raises (without
  // stack room it pushes what fits: (nil, message)).
  int PushJoinOutcome(uint64_t key, lua_State* L);

 private:
  // ---- Running (scheduler.cpp) ----
  // Holds the task itself, not its key: a hash lookup per wake was the
  // largest cost of an IMMEDIATE yield. Ended tasks go to `spare_` rather
  // than being freed while entries may still point at them; `gen` tells a
  // stale entry apart (it only ever grows, across reuse too).
  // `nargs` is kWake for a wake with ("SCHEDULER", elapsed, unit); else the
  // task continues with the `nargs` values already on its stack (a COMMIT's
  // outcome, a promise's value: see Continue).
  static constexpr int32_t kWake = -1;
  struct ReadyEntry {
    Task* task;
    uint32_t gen;
    int32_t nargs = kWake;  // in the padding: an entry stays 16 bytes
  };
  // Runs t->co with `nargs` values already on its stack; handles the result.
  // Returns true when the task parked (then t->wait_start is the time now).
  // `now`: the monotonic time if the caller just read it, else -1. The clock
  // is read once more, after the run (for the CPU budget and the wait).
  bool RunTask(Task* t, lua_State* from, int nargs, int64_t now = -1);
  // One run of a coroutine, shared by RunTask and RunPart
  // (scheduler_run.hpp); returns lua_resume's status. In `ran`: its
  // result count; `end`, the monotonic time after it, read only for a budget
  // or a yield (else 0); `killed`, whether the CPU budget's kill ended it.
  struct Ran {
    int nres = 0;
    int64_t end = 0;
    bool killed = false;
  };
  [[gnu::always_inline]] int RunCoroutine(Task* t, Task* charged, lua_State* from, int nargs, int64_t now, Ran* ran);
  // A task that is not ended, parts included (internal lookups: joiners,
  // deferred runs).
  Task* FindLive(uint64_t key) {
    Task* t = tasks_.Find(key);
    return t != nullptr && !t->ended() ? t : nullptr;
  }
  // Wakes `t` with ("SCHEDULER", elapsed, unit), `now` being the time.
  bool Wake(Task* t, int64_t now);
  // Wake from a batch (RunImmediate, RunTimers), inline in both: a task
  // that only has to run (no parts, not durable, no CPU budget) runs under a
  // LuaHost::BatchEntry, in the batch's host section; any other goes
  // through Wake.
  [[gnu::always_inline]] bool WakeInBatch(Task* t, int64_t now, const LuaHost::Batch& batch);
  // The wait's end and the wake's values ("SCHEDULER", elapsed, unit) on t->co.
  void PushWake(Task* t, int64_t now);
  // What RunTask does after a run that did not park: a cancel, an end.
  bool Unparked(Task* t, int status, int nres);
  // What every wait of Park begins with: the pending instruction becomes
  // the task's wait (kind returned), from `now`.
  WaitKind BeginWait(Task* t, int64_t now);
  // names_: the units in enum order, then "SCHEDULER", then the instructions.
  static constexpr int kSchedulerName = kUnitCount;
  void PushName(lua_State* L, int i) const;
  static void FetchAhead(const Task* next, const Task* after);
  int64_t BatchEnd(int64_t now) const;
  Task* NewTask();
  void Release(Task* t);
  void TrimSpare();
  void Enqueue(Task* t);  // files t as ready (IMMEDIATE)
  // Queues t, its wait cleared and `nargs` values on its stack, at the back
  // of the ready queue: RunImmediate resumes it with them. Meanwhile it is
  // waiting on nothing (kNone), so a resume by id or a late settlement
  // cannot reach it; a cancel makes the entry stale.
  void Continue(Task* t, int nargs);

  // ---- The snapshot lock (scheduler_commit.cpp) ----
  // The last lock went: runs what it held back (see Lock).
  void Unlocked();
  void Defer(Task* t, int nargs);
  void RunDeferred();
  // RAII around scheduler work that runs several tasks back to back outside
  // any window (the waiters of a task that ended; starts a COMMIT held
  // back): with a timeSlice they share one slice (CpuBudget::OpenShared;
  // scheduler_shared_slice.hpp).
  class SharedSlice;

  // ---- Ending (scheduler_end.cpp) ----
  // `end.trace`: where a task killed after it yielded was (KillNow; its
  // traceback on top of the main thread's stack, popped here), else nullptr:
  // EndTask reads it from the coroutine of a task that failed.
  void EndTask(Task* t, TaskEnding end);
  // Runs w, a joiner of a task that ended, with its `nargs` outcome values on
  // its stack; deferred while the lock is held, and filed as ready while a
  // kill goes on (the joiner was not part of the code being killed).
  void RunJoiner(Task* w, int nargs);
  void KillNow(Task* t, TaskEnd kind = TaskEnd::kCancelled);
  void Remember(Task* t, const TaskEnding& end);

  // ---- Detached parts (scheduler_parts.cpp) ----
  Task* OwnerOfPart(const Task* p) const;
  // Whether the family (the task and its parts) runs: then a part or the
  // task itself waits in the ready queue rather than running nested.
  bool FamilyBusy(const Task* t) const;
  // RunTask for a part: the same run, under its task's CPU budget; then it
  // parks (a wait), ends, fails the task, or goes back to its resumer (a
  // plain yield: ParkPlain).
  bool RunPart(Task* p, lua_State* from, int nargs, int64_t now);
  void ParkPlain(Task* p, int nres);
  void ReleasePart(Task* p);
  // The task ends: every part left is closed (its <close> variables run).
  void KillParts(Task* owner);
  // A part failed (kFailed, its error value on top of its stack) or was
  // killed (kTimedOut): the task ends so, where the part was.
  void EndFromPart(Task* p, TaskEnd kind, int status);
  // A message came for `owner`, which is not receiving: a part that is gets it.
  void WakeReceivingPart(Task* owner);
  static void TraceOf(lua_State* M, lua_State* co, lua_Debug* ar, TaskTrace* trace);

  // ---- Mailboxes (scheduler_mailbox.cpp) ----
  // Send; `restored`: the inbox key of a message restored from the store
  // (Replayer::RestoreMessage), kept as it is.
  SendResult Post(uint64_t key, lua_State* from, int nargs, std::string* restored);

  // ---- Waits and timers (scheduler.cpp) ----
  void ClearWait(Task* t);
  void ArmTimer(Task* t, int64_t mono_deadline);
  // Arms t's timer for its wall_deadline, `now` being MonoNs: at most
  // kWallRecheckNs ahead, so a clock stepped forward is seen within it.
  void ArmWall(Task* t, int64_t now) { ArmTimer(t, now + WallWait(t->wall_deadline)); }
  // How long to arm for the wall time `wall_deadline`: what is left of it, capped.
  int64_t WallWait(int64_t wall_deadline) const;
  static bool Preempt(void* ctx, lua_State* L);
  // t waits for a write of its own (a durable wait's record) as a
  // committer does; FinishCommit ends the wait.
  void ParkWriting(Task* t, int64_t now);
  bool HasDormantWakes() const;  // replayer_ is set

  // ---- State ----

  LuaHost* host_;
  const Clock* clock_;
  SchedulerHooks* hooks_;
  TaskTable tasks_;
  ThreadAnchors anchors_;  // every task's coroutine, reachable for the collector
  LuaRef names_[kUnitCount + 1 + kKindCount];
  YieldNames yield_names_;
  std::vector<std::unique_ptr<Task>> spare_;  // ended tasks, for reuse
  RingQueue<ReadyEntry> ready_;
  std::vector<ReadyEntry> due_;  // RunTimers: the entries taken off the heap, in order
  int batch_ = 0;                // inside RunImmediate/RunTimers: Park leaves OnScheduleChange to the batch's end
  TimerQueue timers_;
  RecentResults finished_{kFinishedKept};
  Task* current_ = nullptr;   // the task whose coroutine is running, innermost
  size_t outside_waits_ = 0;  // tasks waiting on kPromise or kCommit
  int locks_ = 0;
  const date::time_zone* default_zone_ = nullptr;
  bool has_store_ = false;
  PersistLimits persist_limits_;
  uint32_t mailbox_limit_ = kDefaultMailboxLimit;
  struct Deferred {
    uint64_t key;
    uint32_t gen;  // the task's at deferral: a stale entry never runs it
    int nargs;     // values waiting on the task's stack
  };
  std::deque<Deferred> deferred_;  // starts, resumes and deliveries held back by the lock
  bool unlocking_ = false;         // inside Unlocked: a nested unlock leaves the rest to it
  int64_t chain_start_ = -1;       // first direct Deliver since the loop turned (monotonic ns), -1 if none
  int64_t last_park_ = 0;          // the latest park's stamp (monotonic ns): a chain's age without a clock read
  uint64_t next_key_ = 1;
  std::string last_send_error_;
  // The durable unit (see replayer()). A friend: for its tasks it files and
  // clears waits (Park, ParkWriting, ClearWait, WallWait), ends them
  // (EndTask, KillNow), posts restored messages (Post), tells the hooks
  // (OnJournal, OnActivate) and gives retained ends a key (next_key_).
  std::unique_ptr<Replayer> replayer_;
  friend class Replayer;
  bool incremental_ = false;  // switched the collector to incremental mode
  std::string prefix_;
  // Detached parts. part_of_: each part's task and its slot in parts_[task].
  // redirect_: a part detached at a promise wait, by the (key, token) the
  // embedder will settle it with. Entries go when the part is released.
  struct PartOf {
    Task* owner;
    size_t index;
    uint64_t from_key;  // with `token`: its redirect_ entry, if from_key != 0
    uint32_t token;
  };
  std::unordered_map<const Task*, PartOf> part_of_;
  std::unordered_map<const Task*, std::vector<Task*>> parts_;
  std::map<std::pair<uint64_t, uint32_t>, Task*> redirect_;
};

// Inline: every start, wake and end calls it, from several files.
inline void Scheduler::ClearWait(Task* t) {
  if (t->timer != 0) {
    timers_.Cancel(t->timer, reinterpret_cast<uintptr_t>(t));
    t->timer = 0;
  }
  if (t->wait == WaitKind::kPromise || t->wait == WaitKind::kCommit) --outside_waits_;
  ++t->gen;  // any ready-queue entry is now stale
  t->wait = WaitKind::kNone;
}

}  // namespace lua_tasks
