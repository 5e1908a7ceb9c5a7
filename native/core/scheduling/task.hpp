// SPDX-License-Identifier: MIT
// Task: one Lua coroutine run by the scheduler, and its single pending wait.
#pragma once

#include <cstdint>
#include <vector>

#include <lua.hpp>

#include "core/scheduling/timer_queue.hpp"
#include "core/scheduling/yield_instruction.hpp"

namespace lua_tasks {

enum class TaskStatus : uint8_t { kRunning, kWaiting, kDone, kFailed, kCancelled };
const char* TaskStatusName(TaskStatus s);

// One task: a coroutine and its single pending wait. The first cache line
// holds everything a wake reads or writes, so with thousands of tasks a wake
// costs one line fetched ahead (Scheduler::FetchAhead) rather than three.
//
// The fields are the scheduler's and the core Lua API's (lua_api_*.cpp).
// The embedder reads key, co, status and context, and otherwise goes
// through the methods below the fields: it never writes a field.
struct Task {
  lua_State* co = nullptr;       // kept alive by its anchor
  uint64_t key = 0;              // numeric id; the string id is prefix + base36(key)
  int64_t wait_start = 0;        // monotonic ns when the wait began
  int64_t cpu_ns = 0;            // CPU time spent so far (monotonic ns while running)
  int64_t pending_value = 0;     // of the pending instruction: see Pend (kept while a FOR waits: its duration)
  TimerQueue::Handle timer = 0;  // the queue entry of a timed wait, 0 if none
  uint32_t gen = 0;              // bumped at every new wait: stale queue entries never wake
  uint32_t queued = 0;           // entries in the ready/due queues naming this Task (stale ones too)
  TaskStatus status = TaskStatus::kRunning;
  WaitKind wait = WaitKind::kNone;
  Unit unit = Unit::kSeconds;  // unit of the yield's elapsed value
  WaitKind pending_kind = WaitKind::kNone;
  Unit pending_unit = Unit::kSeconds;
  bool has_pending = false;     // pending_* hold the instruction of the current yield
  bool cancel_pending = false;  // cancelled while running: killed at its next yield or end
  bool observed = false;        // the embedder wants OnTaskEnd (started from JS)
  bool durable = false;         // has a Journal (Replayer::JournalOf): replayed after a restart
  // Its timed wait ends at wall_deadline on the wall clock, as an UNTIL_TIME:
  // a durable task's FOR or receive timeout, whose deadline is journaled and
  // so the same instant live, dormant or replayed. Set by each wait (Park).
  bool wall_bound = false;
  // Detached parts (scheduler_parts.cpp): kPart on a part, kHasParts and
  // kPartRunning on the task it belongs to. In the padding: 0 for most tasks.
  uint8_t family = 0;
  static constexpr uint8_t kPart = 1;
  static constexpr uint8_t kHasParts = 2;
  static constexpr uint8_t kPartRunning = 4;
  // Cold: read only by the waits that use them.
  uint32_t anchor = kNoAnchor;  // co's slot in Scheduler::anchors_
  static constexpr uint32_t kNoAnchor = UINT32_MAX;
  int64_t wall_deadline = 0;      // UNTIL_TIME / UNTIL_NEXT target (or a wall_bound wait's deadline), wall ns
  uint64_t join_key = 0;          // kJoin: the task waited for
  std::vector<uint64_t> joiners;  // tasks that joined this one (stale keys skipped at the end)
  uint32_t await_token = 0;       // kPromise, kCommit: which settlement may wake it (late ones are ignored)
  // The mailbox (tasks.send / tasks.receive): a table in the registry, made
  // at the first send and unreferenced by Release, so the messages of a task
  // that ends or is cancelled go with it. A message takes slots
  // [head, head + 1 + n): its value count n, then its values (nil among
  // them: the count, not the table's length, says where a message ends).
  int mailbox = LUA_NOREF;
  uint32_t mail_count = 0;  // messages queued
  // The embedder's async context for what the task calls on its side
  // (SchedulerHooks::CaptureContext), 0 if none; given back at Release. A
  // number, not a pointer: it fits in padding (a Task of 8 more bytes made
  // W8's spawn from Lua measurably slower).
  uint32_t context = 0;
  lua_Integer mail_head = 1;  // slot of the oldest message's count
  lua_Integer mail_tail = 1;  // slot the next message starts at

  bool ended() const {
    return status == TaskStatus::kDone || status == TaskStatus::kFailed || status == TaskStatus::kCancelled;
  }
  // The wait it is parked on; kNone unless it is waiting.
  WaitKind current_wait() const { return status == TaskStatus::kWaiting ? wait : WaitKind::kNone; }
  // Parked on a yield instruction that a resume by id may end.
  bool resumable() const { return status == TaskStatus::kWaiting && IsResumable(wait); }
  // Its wait's timer is armed for wall_deadline (re-armed when the wall clock moves).
  bool on_wall_clock() const { return wait == WaitKind::kUntilTime || wait == WaitKind::kUntilNext || wall_bound; }

  // Waits that the embedder settles (kPromise, kCommit) carry a token, so
  // that a settlement arriving after the task moved on wakes nothing.
  // NewAwaitToken makes the token of the next such wait (every earlier one
  // is late from then on); SettledBy says which of those waits a settlement
  // carrying `token` ends now: kPromise, kCommit, or kNone for a late one.
  uint32_t NewAwaitToken() { return ++await_token; }
  WaitKind SettledBy(uint32_t token) const {
    const bool outside = wait == WaitKind::kPromise || wait == WaitKind::kCommit;
    return outside && await_token == token ? wait : WaitKind::kNone;
  }

  // Records the instruction the task is yielding; the scheduler files it as
  // the task's wait when the yield reaches it. `value`: the duration (kFor),
  // the wall-clock target (kUntilTime, kUntilNext) or the joined key (kJoin).
  void Pend(WaitKind kind, int64_t value = 0, Unit u = Unit::kSeconds) {
    pending_kind = kind;
    pending_value = value;
    pending_unit = u;
    has_pending = true;
  }
  void Pend(const WaitRequest& r) {
    const int64_t value = r.kind == WaitKind::kFor ? r.duration_ns : r.kind == WaitKind::kJoin ? r.join_key : r.wall_ns;
    Pend(r.kind, value, r.unit);
  }

  // With mimalloc, Tasks come from its heap of this thread: a task ending
  // among a million others freed its Task through glibc's consolidating
  // path, 9% of W7's wake phase.
#if LUA_TASKS_HAVE_MIMALLOC
  static void* operator new(size_t size);
  static void operator delete(void* p) noexcept;
#endif
};

// Where a task was when it failed or was killed (docs/api.md, Errors: luaStack,
// source, line). Points into the scheduler's frame: valid during OnTaskEnd.
struct TaskTrace {
  const char* traceback = nullptr;  // Lua's traceback of the task's coroutine
  const char* source = nullptr;     // its innermost frame with a source line (short_src), or nullptr
  int line = 0;                     // that frame's current line, 0 with no such frame
};

// How a task ended.
enum class TaskEnd : uint8_t {
  kDone,       // it returned
  kFailed,     // it raised an error
  kCancelled,  // rt.cancel, tasks.cancel, close, or cancelled while it ran
  kTimedOut,   // killed for its CPU budget (taskTimeout)
};

// A task's end as SchedulerHooks::OnTaskEnd hears it, with what its
// coroutine's stack holds. Points into the scheduler's frame: valid during
// that call.
struct TaskEnding {
  TaskEnd kind = TaskEnd::kDone;
  int lua_status = LUA_OK;           // kFailed: the Lua status it failed with (LUA_ERRRUN, LUA_ERRMEM, LUA_ERRERR)
  int nres = 0;                      // on top of the stack: kDone its results, kFailed 1 (its error value)
  const TaskTrace* trace = nullptr;  // kFailed, kTimedOut: where it was
};

}  // namespace lua_tasks
