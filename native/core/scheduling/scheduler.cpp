// SPDX-License-Identifier: MIT
// Scheduler: Lua coroutines run as tasks that wait on a timer queue and a ready queue.
#include "core/scheduling/scheduler.hpp"
#include "core/durable/replayer.hpp"
#include "core/scheduling/scheduler_run.hpp"

#include <algorithm>
#include <optional>
#include <random>
#include <utility>

namespace lua_tasks {

namespace {

// Longest single timer arm for wall-clock waits: they are re-checked at least
// this often, so a clock that jumps is noticed.
constexpr int64_t kWallRecheckNs = int64_t{30} * 1000000000;
constexpr char kIdDigits[] = "0123456789abcdefghijklmnopqrstuvwxyz";

}  // namespace

Scheduler::Scheduler(LuaHost* host, const Clock* clock, SchedulerHooks* hooks)
    : host_(host), clock_(clock), hooks_(hooks) {
  if (host->budget() != nullptr) host->budget()->set_preempt(&Scheduler::Preempt, this);
  host->scheduler = this;
  std::random_device rd;
  // 't', the digits of two random 64-bit values, '-'.
  static_assert(kIdPrefixLength == 2 + 2 * kIdKeyDigits);
  char buf[kIdPrefixLength] = {'t'};
  for (size_t half = 0; half < 2; ++half) {
    uint64_t v = (uint64_t{rd()} << 32) ^ rd() ^ static_cast<uint64_t>(clock->WallNs());
    for (size_t i = 0; i < kIdKeyDigits; ++i) {
      buf[1 + half * kIdKeyDigits + i] = kIdDigits[v % 36];
      v /= 36;
    }
  }
  buf[kIdPrefixLength - 1] = '-';
  prefix_.assign(buf, sizeof buf);
}

Scheduler::~Scheduler() {
  host_->set_closing();  // the tasks functions hold this scheduler's address
  host_->scheduler = nullptr;
  // The contexts of tasks left running (CancelAll skips them).
  tasks_.ForEach([this](const Task& t) {
    if (t.context != 0) hooks_->ReleaseContext(t.context);
  });
  if (host_->budget() != nullptr) host_->budget()->set_preempt(nullptr, nullptr);
}

bool Scheduler::Preempt(void* ctx, lua_State* L) {
  auto* s = static_cast<Scheduler*>(ctx);
  Task* t = s->current_;
  // Only on the task's own thread: a yield from a nested coroutine would go
  // to the user's resume. The hook tries again at the next count.
  if (t == nullptr || t->co != L) return false;
  t->Pend(WaitKind::kImmediate);
  return true;
}

size_t Scheduler::FormatId(uint64_t key, char* buf) const {
  if (replayer_ != nullptr) {
    if (const std::string* id = replayer_->ForeignId(key))
      return id->copy(buf, kIdLength);  // a restored durable task's
  }
  prefix_.copy(buf, kIdPrefixLength);
  // 13 digits as 1 + 6 + 6: each group of six fits 32 bits, so two short
  // chains of 32-bit divisions run side by side instead of one chain of 13
  // 64-bit ones (a tenth of a spawn's time went here).
  constexpr uint64_t k36To6 = 36ull * 36 * 36 * 36 * 36 * 36;
  auto low = static_cast<uint32_t>(key % k36To6);
  auto mid = static_cast<uint32_t>(key / k36To6 % k36To6);
  char* end = buf + kIdLength;
  for (int i = 1; i <= 6; ++i) {
    end[-i] = kIdDigits[low % 36];
    end[-6 - i] = kIdDigits[mid % 36];
    low /= 36;
    mid /= 36;
  }
  buf[kIdPrefixLength] = kIdDigits[key / k36To6 / k36To6];
  return kIdLength;
}

Replayer& Scheduler::EnsureReplayer() {
  if (replayer_ == nullptr) replayer_ = std::make_unique<Replayer>(this);
  return *replayer_;
}

bool Scheduler::HasDormantWakes() const {
  return replayer_->HasWakes();
}

int64_t Scheduler::NextDeadline() const {
  if (replayer_ == nullptr || !replayer_->HasWakes()) return timers_.NextDeadline();
  // (A wake of a task activated since may come first: it fires early and finds nothing.)
  // A dormant task's wake is on the wall clock: read against it now.
  const int64_t mono = clock_->MonoNs() + (replayer_->NextWake() - clock_->WallNs());
  return timers_.empty() ? mono : std::min(mono, timers_.NextDeadline());
}

bool Scheduler::Resolve(std::string_view id, uint64_t* key) {
  if (ParseId(id, key)) return true;
  if (id.size() != kIdLength) return false;
  if (replayer_ != nullptr && replayer_->async_reads()) {
    replayer_->Activating(id);  // its read starts: the caller waits for it (Activations)
    return false;
  }
  hooks_->OnActivate(std::string(id));
  return ParseId(id, key);
}

std::string Scheduler::IdOf(uint64_t key) const {
  char buf[kIdLength];
  return std::string(buf, FormatId(key, buf));
}

bool Scheduler::ParseId(std::string_view id, uint64_t* key) const {
  if (id.size() != kIdLength) return false;
  if (id.substr(0, kIdPrefixLength) != prefix_) {
    return replayer_ != nullptr && replayer_->ForeignKey(id, key);
  }
  uint64_t k = 0;
  for (size_t i = kIdPrefixLength; i < kIdLength; ++i) {
    const char c = id[i];
    uint64_t d;
    if (c >= '0' && c <= '9') {
      d = static_cast<uint64_t>(c - '0');
    } else if (c >= 'a' && c <= 'z') {
      d = static_cast<uint64_t>(c - 'a' + 10);
    } else {
      return false;
    }
    // Twelve digits always fit (36^12 < 2^64); only the last can overflow.
    if (i == kIdLength - 1 && k > (UINT64_MAX - d) / 36) return false;
    k = k * 36 + d;
  }
  *key = k;
  return true;
}

uint64_t Scheduler::Start(lua_State* L, int nargs, bool observed, StartError* error, DurableStart* durable) {
  LuaHost::HostSection section(host_, L);  // no Lua error may unwind these C++ frames
  const int fn = lua_gettop(L) - nargs;
  if (error != nullptr) *error = StartError::kNotStartable;
  lua_State* co;
  if (lua_type(L, fn) == LUA_TTHREAD) {
    co = lua_tothread(L, fn);
    // The main thread has no frames and a value (the traceback handler) on
    // its stack, so it passes for a coroutine not yet started: run, it
    // would lose its stack.
    if (co == host_->main()) {
      lua_settop(L, fn - 1);
      if (error != nullptr) *error = StartError::kMainThread;
      return 0;
    }
    // Only a coroutine that has not started (no frames, its function on its
    // stack) can become a task; a suspended, running or dead one belongs to
    // its owner.
    lua_Debug ar;
    if (co == L || lua_status(co) != LUA_OK || lua_getstack(co, 0, &ar) != 0 || lua_gettop(co) == 0) {
      lua_settop(L, fn - 1);
      return 0;
    }
    // Past those checks, a task's coroutine can only be one whose start a
    // COMMIT lock deferred (any other has run): its mark says so.
    if (LuaHost::HasTaskMark(co)) {
      lua_settop(L, fn - 1);
      return 0;
    }
    lua_pushvalue(L, fn);
  } else if (lua_type(L, fn) == LUA_TFUNCTION) {
    co = lua_newthread(L);
    lua_pushvalue(L, fn);
    lua_xmove(L, co, 1);
  } else {
    lua_settop(L, fn - 1);
    return 0;
  }
  // Stack: [fn, args..., thread]. Moving values onto a thread needs room on
  // its stack, which Lua does not check outside debug builds: a new thread
  // has about 40 slots, and tasks.start(f, table.unpack(big)) overran them.
  if (!lua_checkstack(co, nargs)) {
    lua_settop(L, fn - 1);
    if (error != nullptr) *error = StartError::kNoStackRoom;
    return 0;
  }
  Task* t = NewTask();
  if (durable != nullptr) EnsureReplayer().Attach(t, std::move(*durable));
  t->co = co;
  LuaHost::SetTaskMark(co, true);  // until Release
  t->observed = observed;
  t->anchor = anchors_.Put(L, host_->memory().arena().SlotOf(co));  // pops the thread
  lua_xmove(L, co, nargs);                                          // args onto the coroutine, above its function
  lua_settop(L, fn - 1);
  const uint64_t key = t->key;
  if (!observed && current_ != nullptr && hooks_->SharesContext(*current_)) {
    if (current_->context == 0) current_->context = hooks_->CaptureContext(false);  // in its first run
    t->context = current_->context;
    if (t->context != 0) hooks_->RetainContext(t->context);
  }
  if (locks_ > 0) {
    t->status = TaskStatus::kWaiting;  // wait kNone: not resumable by id meanwhile
    // It first runs at an unlock, inside whatever call unlocks.
    if (t->context == 0) t->context = hooks_->CaptureContext(!observed);
    Defer(t, nargs);
    return key;
  }
  if (RunTask(t, L, nargs)) {
    // It outlived its first run: it keeps the context of the call that
    // started it (looked up again: the run's end may have run host code).
    Task* parked = Find(key);
    if (parked != nullptr && parked->context == 0) parked->context = hooks_->CaptureContext(!observed);
  }
  return key;
}

Task* Scheduler::NewTask() {
  std::unique_ptr<Task> task;
  if (spare_.empty()) {
    task = std::make_unique<Task>();
  } else {
    task = std::move(spare_.back());
    spare_.pop_back();
    const uint32_t gen = task->gen;  // stale queue entries may still name this Task
    const uint32_t queued = task->queued;
    std::vector<uint64_t> joiners = std::move(task->joiners);
    *task = Task();
    task->gen = gen + 1;
    task->queued = queued;
    task->joiners = std::move(joiners);  // empty, capacity kept
  }
  task->key = next_key_++;
  if (!incremental_ && tasks_.size() >= kIncrementalAt) {
    // Generational collection re-traverses every live coroutine at each minor
    // collection, so with many tasks alive each minor one costs as much as a
    // full cycle (bench W11: 100,000 tasks waiting beside one making garbage
    // stall the loop up to 18-24 ms generational, 8-10 ms incremental).
    // Switching only marks objects white (no collection runs), and the
    // runtime stays incremental after.
    //
    // Lua's default step multiplier (100) has a cycle done after the heap
    // grows by under 1%: with a million threads alive, that is a few hundred
    // ms of marking packed into the next handful of tasks.start calls (stalls
    // of 30-60 ms, W7). At 10 the same work spreads over about 10% of growth,
    // still far inside the pause's doubling; steps of 1 KB keep each piece
    // small. W7 lateness p99 55-58 -> 18-21 ms; W11 stall max 6.4 -> 5.0 ms.
    lua_gc(host_->main(), LUA_GCINC, 0, kStepMul, kStepSizeLog2);
    incremental_ = true;
  }
  return tasks_.Insert(std::move(task));
}

void Scheduler::Release(Task* t) {
  if (t->co != nullptr) LuaHost::SetTaskMark(t->co, false);  // a plain (dead or reset) coroutine again
  if (t->anchor != Task::kNoAnchor) anchors_.Clear(host_->main(), t->anchor);
  t->anchor = Task::kNoAnchor;
  if (t->mailbox != LUA_NOREF) luaL_unref(host_->main(), LUA_REGISTRYINDEX, t->mailbox);  // its messages go
  t->mailbox = LUA_NOREF;
  t->mail_count = 0;
  t->joiners.clear();
  if (t->context != 0) hooks_->ReleaseContext(t->context);
  t->context = 0;
  if (t->durable) replayer_->Released(t);
  std::unique_ptr<Task> owned = tasks_.Erase(t->key);
  if (!owned) return;  // released already (never expected: see Find)
  // Kept for reuse up to kSpareKept, and while a queue entry names it (a
  // stale entry must find a Task to read its gen from); else freed.
  if (spare_.size() < kSpareKept || owned->queued > 0) spare_.push_back(std::move(owned));
}

void Scheduler::TrimSpare() {
  // Frees spares beyond kSpareKept that no queue entry names any more. Runs
  // after every batch, so the pool cannot grow with a queue that is never
  // empty (a task yielding IMMEDIATE forever while others end).
  for (size_t i = spare_.size(); i-- > 0 && spare_.size() > kSpareKept;) {
    if (spare_[i]->queued > 0) continue;
    if (i != spare_.size() - 1) spare_[i] = std::move(spare_.back());
    spare_.pop_back();
  }
}

void Scheduler::Continue(Task* t, int nargs) {
  t->status = TaskStatus::kWaiting;
  ready_.push_back({t, t->gen, nargs});
  ++t->queued;
}

void Scheduler::Defer(Task* t, int nargs) {
  deferred_.push_back({t->key, t->gen, nargs});
}

bool Scheduler::RunTask(Task* t, lua_State* from, int nargs, int64_t now) {
  if (t->family != 0) {
    if (FamilyBusy(t)) {
      // Its task or another part of it is on the C stack: it runs after, from
      // the ready queue (a task's code never runs nested in its own).
      Continue(t, nargs);
      if (batch_ == 0) hooks_->OnScheduleChange();
      return false;
    }
    if ((t->family & Task::kPart) != 0) return RunPart(t, from, nargs, now);
  }
  if (t->durable && (nargs = replayer_->ValuesIn(t, nargs)) < 0) return false;
  // A durable task in replay goes round again with each recorded outcome.
  for (;;) {
    Ran run;
    const int status = RunCoroutine(t, t, from, nargs, now, &run);
    const int nres = run.nres;
    const int64_t end = run.end;
    LuaHost::HostSection section(host_, from);  // allocations below never raise
    if (run.killed) {
      if (status == LUA_YIELD) {
        KillNow(t, TaskEnd::kTimedOut);  // it caught the kill and yielded: it still dies
      } else {
        EndTask(t, {TaskEnd::kTimedOut});
      }
      return false;
    }
    if (status == LUA_YIELD) {
      if (nres > 0) lua_pop(t->co, nres);  // the instruction's values: recorded by Task::Pend already
      if (t->cancel_pending) {
        KillNow(t);
        return false;
      }
      if (t->durable) {
        const Replayer::Yield r = replayer_->OnYield(t, end, &nargs);
        if (r == Replayer::Yield::kReplayed) {  // the recorded outcome is on its stack
          now = end;
          continue;
        }
        if (r != Replayer::Yield::kLive) return r == Replayer::Yield::kParked;
      }
      Park(t, end);
      return true;
    }
    if (t->cancel_pending) {
      KillNow(t);  // cancelled while it ran (Cancel said true): it ends cancelled, whatever it returned
      return false;
    }
    if (t->durable && replayer_->OnReturn(t)) return false;
    EndTask(t, status == LUA_OK ? TaskEnding{TaskEnd::kDone, LUA_OK, nres} : TaskEnding{TaskEnd::kFailed, status, 1});
    return false;
  }
}

inline void Scheduler::Enqueue(Task* t) {
  ready_.push_back({t, t->gen});
  ++t->queued;
}

void Scheduler::ArmTimer(Task* t, int64_t mono_deadline) {
  // The entry names the Task itself (no lookup when it fires): every wait's
  // entry is cancelled in ClearWait, before the task can end.
  t->timer = timers_.Add(mono_deadline, reinterpret_cast<uintptr_t>(t));
}

// No instruction pending: the coroutine yielded past the wrappers (a
// preemption that found no pending yield is one): it waits as IMMEDIATE.
inline WaitKind Scheduler::BeginWait(Task* t, int64_t now) {
  const WaitKind kind = t->has_pending ? t->pending_kind : WaitKind::kImmediate;
  t->unit = t->has_pending ? t->pending_unit : Unit::kSeconds;
  t->has_pending = false;
  t->status = TaskStatus::kWaiting;
  t->wait = kind;
  t->wall_bound = false;
  ++t->gen;
  t->wait_start = now;
  last_park_ = now;
  return kind;
}

void Scheduler::Park(Task* t, int64_t now) {
  const int64_t value = t->pending_value;
  switch (BeginWait(t, now)) {
    case WaitKind::kImmediate:
      Enqueue(t);
      break;
    case WaitKind::kFor:
      ArmTimer(t, t->wait_start + value);
      break;
    case WaitKind::kUntilTime:
    case WaitKind::kUntilNext: {
      t->wall_deadline = value;
      if (t->wall_deadline <= clock_->WallNs()) {
        Enqueue(t);  // in the past: next turn
      } else {
        ArmWall(t, t->wait_start);
      }
      break;
    }
    case WaitKind::kJoin:
      t->join_key = static_cast<uint64_t>(value);
      if (Task* target = Find(t->join_key)) {
        target->joiners.push_back(t->key);
      } else {
        // Ended while the join's record was written, or a replay's join of
        // a task that ended or is gone: the join ends now, never hangs.
        const int n = PushJoinOutcome(t->join_key, t->co);
        ClearWait(t);
        Continue(t, n);
      }
      break;
    case WaitKind::kPromise:
      ++outside_waits_;
      break;
    case WaitKind::kRestore:
      break;  // Replayer::Activated wakes it
    case WaitKind::kReceive:
      // tasks.receive suspends only on an empty mailbox; a message that came
      // in between (nothing is known to send there, but it costs one test)
      // wakes it at once. value: the timeout (ns), -1 for none.
      if (Owner(t)->mail_count > 0) {
        ClearWait(t);
        Continue(t, 0);
      } else if (value >= 0) {
        ArmTimer(t, t->wait_start + value);
      }
      break;
    case WaitKind::kCommit:
      ++outside_waits_;
      hooks_->OnCommit(*t);  // the embedder calls FinishCommit when written
      return;
    default:  // INDEFINITELY, promises, commits: woken by someone else
      break;
  }
  if (batch_ == 0) hooks_->OnScheduleChange();
}

void Scheduler::ParkWriting(Task* t, int64_t now) {
  t->has_pending = false;
  t->status = TaskStatus::kWaiting;
  t->wait = WaitKind::kCommit;
  ++t->gen;
  t->wait_start = now;
  last_park_ = now;
  ++outside_waits_;
  hooks_->OnCommit(*t);  // FinishCommit files the wait
}

std::optional<int64_t> Scheduler::WaitEndsWallNs(const Task& t) const {
  if (t.status != TaskStatus::kWaiting) return std::nullopt;
  if (t.on_wall_clock()) return t.wall_deadline;
  // A receive without a timeout has no timer (pending_value is -1).
  const bool timed = t.wait == WaitKind::kFor || (t.wait == WaitKind::kReceive && t.timer != 0);
  if (!timed) return std::nullopt;
  // pending_value still holds the duration: only the task's next yield replaces it.
  return clock_->WallNs() + (t.wait_start + t.pending_value - clock_->MonoNs());
}

void Scheduler::WallClockMoved(int64_t by_ns) {
  if (by_ns <= 0) return;
  const int64_t mono = clock_->MonoNs();
  tasks_.ForEach([&](Task& t) {
    if (t.status != TaskStatus::kWaiting || t.timer == 0 || !t.on_wall_clock()) return;
    timers_.Cancel(t.timer, reinterpret_cast<uintptr_t>(&t));
    ArmWall(&t, mono);
  });
  if (batch_ == 0) hooks_->OnScheduleChange();
}

int64_t Scheduler::WallWait(int64_t wall_deadline) const {
  return std::clamp<int64_t>(wall_deadline - clock_->WallNs(), 0, kWallRecheckNs);
}

void Scheduler::CacheNames(lua_State* L) {
  anchors_.Init(L);
  for (int i = 0; i < kUnitCount; ++i) {
    lua_pushstring(L, UnitName(static_cast<Unit>(i)));
    yield_names_.units[i] = lua_topointer(L, -1);
    names_[i] = LuaRef::Pop(L);
  }
  lua_pushliteral(L, "SCHEDULER");
  names_[kSchedulerName] = LuaRef::Pop(L);
  for (int i = 0; i < kKindCount; ++i) {
    lua_pushstring(L, KindName(i));
    yield_names_.kinds[i] = lua_topointer(L, -1);
    names_[kSchedulerName + 1 + i] = LuaRef::Pop(L);
  }
}

void Scheduler::PushName(lua_State* L, int i) const {
  if (names_[i].valid()) {
    names_[i].Push(L);
  } else {
    lua_pushstring(L, i == kSchedulerName ? "SCHEDULER" : UnitName(static_cast<Unit>(i)));
  }
}

inline void Scheduler::PushWake(Task* t, int64_t now) {
  const int64_t elapsed = now - t->wait_start;
  ClearWait(t);
  lua_State* co = t->co;
  PushName(co, kSchedulerName);
  lua_pushnumber(co, static_cast<double>(elapsed) / static_cast<double>(UnitNs(t->unit)));
  PushName(co, static_cast<int>(t->unit));
}

bool Scheduler::Wake(Task* t, int64_t now) {
  PushWake(t, now);
  return RunTask(t, host_->current(), 3, now);
}

// RunTask's run and its outcome, for the tasks it applies to.
inline bool Scheduler::WakeInBatch(Task* t, int64_t now, const LuaHost::Batch& batch) {
  if (t->family != 0 || t->durable || host_->budget() != nullptr) return Wake(t, now);
  PushWake(t, now);
  lua_State* from = host_->current();  // the batch's: read before the entry switches it
  Task* saved = current_;
  current_ = t;
  t->status = TaskStatus::kRunning;
  t->wait = WaitKind::kNone;
  t->has_pending = false;
  int nres = 0;
  int status;
  {
    LuaHost::BatchEntry entry(batch, t->co);
    status = lua_resume(t->co, from, 3, &nres);
  }
  current_ = saved;
  if (status == LUA_YIELD) {
    if (nres > 0) lua_pop(t->co, nres);  // the instruction's values: recorded by Task::Pend already
    if (!t->cancel_pending) {
      // Park's common waits, inline; batch_ > 0, so no OnScheduleChange.
      const int64_t end = clock_->MonoNs();
      const WaitKind kind = t->has_pending ? t->pending_kind : WaitKind::kImmediate;
      if (kind == WaitKind::kImmediate) {
        BeginWait(t, end);
        Enqueue(t);
      } else if (kind == WaitKind::kFor) {
        BeginWait(t, end);
        ArmTimer(t, end + t->pending_value);
      } else {
        Park(t, end);
      }
      return true;
    }
  }
  return Unparked(t, status, nres);
}

bool Scheduler::Unparked(Task* t, int status, int nres) {
  if (t->cancel_pending) {
    KillNow(t);  // cancelled while it ran: it ends cancelled, whatever it returned
    return false;
  }
  EndTask(t, status == LUA_OK ? TaskEnding{TaskEnd::kDone, LUA_OK, nres} : TaskEnding{TaskEnd::kFailed, status, 1});
  return false;
}

void Scheduler::Deliver(Task* t, int nargs) {
  ClearWait(t);
  if (locks_ > 0) {
    t->status = TaskStatus::kWaiting;  // wait kNone, as a deferred resume
    Defer(t, nargs);
    hooks_->OnScheduleChange();
    return;
  }
  // A settlement runs in a microtask, and one the task's run settles at once
  // (an await of a resolved promise) runs in the same microtask checkpoint:
  // the loop turns only once the chain stops. So the chain runs tasks
  // directly for kDirectChainNs per loop turn (an await costs no loop turn,
  // W4) and then through the ready queue, one hop per turn, until the loop
  // polls again (LoopTurned). Its age is the last park's stamp, not a clock
  // read per await: each link of a chain parks, and parking reads the clock.
  if (chain_start_ < 0) {
    chain_start_ = clock_->MonoNs();
    last_park_ = chain_start_;
  }
  if (last_park_ - chain_start_ >= kDirectChainNs) {
    Continue(t, nargs);
  } else {
    RunTask(t, host_->current(), nargs);
  }
  hooks_->OnScheduleChange();
}

// With thousands of tasks, each wake touches memory last used a whole batch
// ago. So fetch ahead: the coroutine of the next task (whose Task was fetched
// the time before) and the Task after it. Tasks in a queue are never freed
// (see Release), and prefetching a stale pointer is harmless.
void Scheduler::FetchAhead(const Task* next, const Task* after) {
  if (after != nullptr) {
    // Its hot fields come first, but they may straddle two lines: malloc
    // aligns to 16 bytes, not 64.
    __builtin_prefetch(after);
    __builtin_prefetch(reinterpret_cast<const char*>(after) + 63);
  }
  if (next != nullptr) {
    const char* co = reinterpret_cast<const char*>(next->co);
    __builtin_prefetch(co);
    __builtin_prefetch(co + 64);
    __builtin_prefetch(co + 128);
  }
}

// With timeSlice, a batch also ends once it has held the loop for a slice:
// N spinning tasks, each preempted after its own slice, would otherwise hold
// it for N slices. The rest stay queued, in order, for the next loop turn.
int64_t Scheduler::BatchEnd(int64_t now) const {
  const CpuBudget* budget = host_->budget();
  return budget != nullptr && budget->slice_ns() > 0 ? now + budget->slice_ns() : INT64_MAX;
}

// The clock is read once per wake: a task that parks stamps its wait_start
// last thing, and that stamp is "now" for the next one in the batch.
void Scheduler::RunImmediate() {
  if (locks_ > 0) return;
  ++batch_;
  // Only the tasks ready now: one that yields IMMEDIATE again lands behind
  // the batch and runs on the next loop turn, so I/O is not starved.
  size_t n = ready_.size();
  int64_t now = clock_->MonoNs();
  const int64_t batch_end = BatchEnd(now);
  {
    const LuaHost::Batch batch(host_, host_->current());
    while (n-- > 0 && !ready_.empty() && locks_ == 0 && now < batch_end && !host_->terminating()) {
      const ReadyEntry e = ready_.front();
      ready_.pop_front();
      --e.task->queued;
      FetchAhead(ready_.empty() ? nullptr : ready_[0].task, ready_.size() > 1 ? ready_[1].task : nullptr);
      Task* t = e.task;
      if (t->gen != e.gen || t->status != TaskStatus::kWaiting) continue;
      bool parked;
      if (e.nargs == kWake) {
        parked = WakeInBatch(t, now, batch);
      } else {
        ClearWait(t);
        parked = RunTask(t, host_->current(), e.nargs, now);
      }
      now = parked ? t->wait_start : clock_->MonoNs();
    }
  }
  --batch_;
  TrimSpare();
  hooks_->OnScheduleChange();
}

void Scheduler::RunTimers() {
  if (locks_ > 0) return;
  ++batch_;
  // Entries added by this batch wait for the next one, so a task looping on
  // FOR 0 cannot hold the loop here.
  const uint64_t before = timers_.next_seq();
  int64_t now = clock_->MonoNs();
  const int64_t batch_end = BatchEnd(now);
  {
    const LuaHost::Batch batch(host_, host_->current());
    for (;;) {
      // Take the entries due now, up to kDueChunk, then run them fetching
      // ahead as RunImmediate does. A taken task has no timer: a resume or
      // cancel meanwhile bumps its gen, which is how its entry here goes
      // stale. At most a chunk: what a slice's end leaves is armed again, and
      // taking a backlog of 100,000 due wakes whole, to run a slice of them
      // and arm the rest again, held the loop for the taking alone (one wake
      // a slice, W14 wakes with timeSlice).
      uint64_t payload;
      TimerQueue::Handle h;
      while (due_.size() < kDueChunk && timers_.PopIfDue(now, before, &payload, &h)) {
        Task* t = reinterpret_cast<Task*>(static_cast<uintptr_t>(payload));
        if (t->timer != h) continue;  // stale: never wakes a task
        t->timer = 0;
        if (t->on_wall_clock() && t->wall_deadline > clock_->WallNs()) {
          ArmWall(t, now);  // the clock was set back (or this is a recheck): not due yet
          continue;
        }
        due_.push_back({t, t->gen});
        ++t->queued;
      }
      if (due_.empty()) break;
      for (size_t i = 0; i < due_.size(); ++i) {
        Task* t = due_[i].task;
        --t->queued;
        if (t->gen != due_[i].gen || t->status != TaskStatus::kWaiting) continue;
        if (locks_ > 0 || now >= batch_end ||
            host_->terminating()) {  // a COMMIT began, or the slice is used: the rest wait, still due
          ArmTimer(t, now);
          continue;
        }
        FetchAhead(i + 1 < due_.size() ? due_[i + 1].task : nullptr, i + 2 < due_.size() ? due_[i + 2].task : nullptr);
        now = WakeInBatch(t, now, batch) ? t->wait_start : clock_->MonoNs();
      }
      due_.clear();
      if (locks_ > 0 || now >= batch_end) break;
    }
  }
  if (replayer_ != nullptr && locks_ == 0) replayer_->ActivateDue(batch_end);
  --batch_;
  TrimSpare();
  hooks_->OnScheduleChange();
}

Scheduler::ResumeResult Scheduler::Resume(uint64_t key, lua_State* from, int nargs) {
  Task* t = Find(key);
  if (t == nullptr) {
    lua_pop(from, nargs);
    return ResumeResult::kNotFound;
  }
  if (t == current_ || (current_ != nullptr && t == Owner(current_))) {  // from the task or a part of it
    lua_pop(from, nargs);
    return ResumeResult::kSelf;
  }
  if (t->status != TaskStatus::kWaiting || !IsResumable(t->wait)) {
    lua_pop(from, nargs);
    return ResumeResult::kNotResumable;
  }
  if (!lua_checkstack(t->co, nargs)) {  // see Start
    lua_pop(from, nargs);
    return ResumeResult::kNoStackRoom;
  }
  ClearWait(t);
  lua_xmove(from, t->co, nargs);
  if (locks_ > 0) {
    Defer(t, nargs);
    hooks_->OnScheduleChange();
    return ResumeResult::kResumed;
  }
  RunTask(t, from, nargs);
  hooks_->OnScheduleChange();
  return ResumeResult::kResumed;
}

}  // namespace lua_tasks
