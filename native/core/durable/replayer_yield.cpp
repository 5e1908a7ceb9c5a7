// SPDX-License-Identifier: MIT
// Replayer: a durable task's yields and the values its waits end with, recorded live and read back on replay.
//
// A durable task's wait on anything but IMMEDIATE or a promise is a durable
// point: its record is written (a COMMIT's write, through OnCommit) before
// the task is filed as waiting (Scheduler::ParkWriting, then OnWritten).
#include <algorithm>
#include <cstdlib>

#include "core/base/coded_error.hpp"
#include "core/durable/replayer.hpp"
#include "core/scheduling/scheduler.hpp"

namespace lua_tasks {

bool Replayer::IsDurablePoint(WaitKind k) {
  return k == WaitKind::kFor || k == WaitKind::kUntilTime || k == WaitKind::kUntilNext ||
         k == WaitKind::kIndefinitely || k == WaitKind::kReceive || k == WaitKind::kJoin;
}

namespace {

// Whether a replayed yield is the one recorded: the instruction, and the
// arguments that the code gives (not those computed from the clock: an
// UNTIL_NEXT's next instant, a joined task's key in this run).
bool SameYield(const YieldRecord& was, WaitKind kind, int64_t value) {
  if (was.kind != kind) return false;
  if (kind == WaitKind::kFor || kind == WaitKind::kUntilTime || kind == WaitKind::kReceive) return was.value == value;
  return true;
}

}  // namespace

void Replayer::Fail(Task* t, const std::string& message) {
  LuaHost::HostSection section(s_.host(), s_.host()->current());
  s_.ClearWait(t);
  t->status = TaskStatus::kRunning;
  {
    LuaHost::Entry entry(s_.host(), t->co);
    lua_resetthread(t->co);
  }
  lua_settop(t->co, 0);
  PushCodedError(t->co, ErrorCode::kNondeterminism, message.c_str());
  s_.EndTask(t, {TaskEnd::kFailed, LUA_ERRRUN, 1});
}

int Replayer::ValuesIn(Task* t, int nargs) {
  Journal* j = JournalOf(t);
  if (j == nullptr) return nargs;
  const WaitKind w = j->awaiting;
  j->awaiting = WaitKind::kNone;
  const bool unrecorded = j->unrecorded_commit;
  j->unrecorded_commit = false;
  std::optional<std::string> call;  // the JS call whose promise settled, if one
  call.swap(j->awaiting_call);
  if (w == WaitKind::kNone || j->replaying()) return nargs;  // a first run, a preemption, a replayed outcome
  if (unrecorded && nargs == 2 && lua_type(t->co, -2) == LUA_TBOOLEAN && lua_toboolean(t->co, -2) &&
      lua_isnil(t->co, -1)) {
    ++j->landed_commits;  // a COMMIT that landed: what the task journals next shows it
    return nargs;
  }
  std::string payload, error;
  bool ok;
  {
    LuaHost::HostSection section(s_.host(), s_.host()->current());
    ok = EncodeRecord(j, t->co, nargs, &payload, &error);
    // A promise's, a COMMIT's or a joined task's outcome, which the task did
    // not make: one that cannot persist is journaled as what a replay can give.
    const bool outcome = w == WaitKind::kPromise || w == WaitKind::kCommit || w == WaitKind::kJoin;
    if (!ok && outcome && nargs == 2 && !lua_toboolean(t->co, -2)) {
      // A rejection, or a joined task's failure, whose error cannot persist
      // (a JS error object): the task gets it as it is; the journal keeps
      // its message, which a replay raises.
      lua_pushboolean(t->co, 0);
      PushErrorMessage(t->co, -2);
      ok = EncodeValues(t->co, 2, &payload, &error);
      lua_pop(t->co, 2);
    } else if (!ok && outcome) {
      // A value that cannot persist (a JS object by reference): the await
      // raises why, in this run and in a replay alike.
      lua_pop(t->co, nargs);
      lua_pushboolean(t->co, 0);
      lua_pushfstring(t->co, "the outcome cannot be journaled for durable task %s: %s", j->id().c_str(), error.c_str());
      nargs = 2;
      ok = EncodeValues(t->co, nargs, &payload, &error);
    }
  }
  if (!ok) {
    Fail(t, "durable task " + j->id() + ": the values it was resumed with cannot be journaled: " + error);
    return -1;
  }
  if (w == WaitKind::kPromise) {
    AppendRecord(j, RecordKind::kCall, payload, call ? std::optional<std::string_view>(*call) : std::nullopt);
  } else if (unrecorded) {
    AppendRecord(j, RecordKind::kCommitFailed, EncodeCommitFailed(j->landed_commits, payload));
  } else {
    AppendRecord(j, RecordKind::kIn, payload);
  }
  // Running again: its index entry must not leave it dormant at the next
  // open, whatever that open's clock says of the wait's deadline.
  if (indexed_ && IsDurablePoint(w)) j->Index(nullptr, &writes_);
  return nargs;
}

int Replayer::JournalYield(Task* t, int64_t now) {
  Journal* j = JournalOf(t);
  if (j == nullptr) return kParkAsUsual;
  if (j->diverged) {
    Fail(t, j->divergence);
    return kDurableFailed;
  }
  if (j->stopped) {
    s_.KillNow(t);
    return kDurableFailed;
  }
  if (j->restart) {  // tasks.continue_as_new
    int nargs = 0;
    if (!Restart(t, &nargs)) return kDurableFailed;
    return nargs;
  }
  if (!t->has_pending) return kParkAsUsual;  // a preemption: not the code's, not journaled
  const WaitKind kind = t->pending_kind;
  // Waiting for another task's restore is not the code's yield: the call
  // that waits is made again after it, and journaled then.
  if (kind == WaitKind::kRestore) return kParkAsUsual;
  // Replay-only: a wait past the journal's end, or on a promise (JS at work), is live.
  if (replay_only_ && (kind == WaitKind::kPromise || !j->replaying())) {
    StopReplay(j, (std::string("a yield (") + WaitKindName(kind) + ")").c_str());
    s_.KillNow(t);
    return kDurableFailed;
  }
  if (kind == WaitKind::kPromise) {
    j->awaiting = kind;  // its outcome is the JS call's record
    return kParkAsUsual;
  }
  YieldRecord y;
  y.kind = kind;
  y.unit = t->pending_unit;
  y.value = t->pending_value;
  y.wall_start = s_.clock()->WallNs();
  if (kind == WaitKind::kFor || (kind == WaitKind::kReceive && y.value >= 0)) {
    y.wall_deadline = y.wall_start + y.value;
  } else if (kind == WaitKind::kUntilTime || kind == WaitKind::kUntilNext) {
    y.wall_deadline = y.value;
  }
  // The values of the record just read (a view into it), pushed as the
  // yield's outcome: their count.
  const auto replay_outcome = [&](std::string_view values) -> int {
    std::string error;
    int n;
    {
      LuaHost::HostSection section(s_.host(), s_.host()->current());
      n = PushValues(t->co, values, &error, Decoding(s_.host()));
    }
    if (!j->replaying()) j->EndReplay();
    if (n < 0) {
      Fail(t, "durable task " + j->id() + ": a journal record does not read: " + error);
      return kDurableFailed;
    }
    return n;
  };
  YieldRecord was;
  const bool recorded = j->replaying() && j->next_kind() == RecordKind::kYield && DecodeYield(j->Peek(), &was);
  if (kind == WaitKind::kCommit && j->replaying() && !(recorded && was.kind == WaitKind::kCommit)) {
    // A COMMIT without a yield record (a journal of an earlier version has
    // one: it replays below). One that failed left its outcome, counting the
    // COMMITs that landed before it; one that landed left nothing, and the
    // record that follows shows it returned true.
    uint64_t landed = 0;
    std::string_view values;
    if (j->next_kind() == RecordKind::kCommitFailed && DecodeCommitFailed(j->Peek(), &landed, &values) &&
        landed == j->landed_commits) {
      j->Next();
      return replay_outcome(values);
    }
    ++j->landed_commits;
    bool room;
    {
      LuaHost::HostSection section(s_.host(), s_.host()->current());
      room = lua_checkstack(t->co, 2) != 0;
      if (room) {
        lua_pushboolean(t->co, 1);
        lua_pushnil(t->co);
      }
    }
    if (!room) {
      Fail(t, "durable task " + j->id() + ": no stack room to replay a COMMIT");
      return kDurableFailed;
    }
    return 2;
  }
  if (j->replaying()) {
    if (!recorded || !SameYield(was, kind, y.value)) {
      Fail(t, Diverge(j, (std::string("a yield (") + WaitKindName(kind) + ")").c_str()));
      return kDurableFailed;
    }
    j->Next();
    if (j->replaying()) {
      if (j->next_kind() != RecordKind::kIn) {
        Fail(t, Diverge(j, "a wait's outcome"));
        return kDurableFailed;
      }
      return replay_outcome(j->Next());
    }
    if (replay_only_) {  // the journal ends at this wait: where a replay-only run stops
      StopReplay(j, (std::string("its wait, a yield (") + WaitKindName(kind) + ")").c_str());
      s_.KillNow(t);
      return kDurableFailed;
    }
    // The journal ends at this wait: the task waits again, with the deadline it had.
    j->EndReplay();
    j->awaiting = kind;
    j->held = was;
    // A join's recorded key is of the run that recorded it: this run's
    // joins the task its id names now.
    if (kind == WaitKind::kJoin) j->held.value = y.value;
    j->held_next = y.value;
    return kParkReplayed;
  }
  if (kind == WaitKind::kCommit) {
    // No record unless it fails (ValuesIn): a step + COMMIT journals the step alone.
    j->awaiting = kind;
    j->unrecorded_commit = true;
    return kParkAsUsual;
  }
  AppendRecord(j, RecordKind::kYield, EncodeYield(y));
  j->awaiting = kind;
  if (!IsDurablePoint(kind)) return kParkAsUsual;
  if (indexed_) j->Index(&y, &writes_);
  j->held = y;
  j->held_mono_start = now;
  return kParkFlushing;
}

// Files the held wait of t's journal with its recorded deadline. `mono_start`:
// when the wait began on this run's monotonic clock.
void Replayer::ParkJournaled(Task* t, int64_t now, int64_t mono_start) {
  Journal* j = JournalOf(t);
  const YieldRecord& y = j->held;
  const bool timed = y.kind == WaitKind::kFor || (y.kind == WaitKind::kReceive && y.value >= 0);
  t->Pend(y.kind, y.value, y.unit);
  // Its journaled deadline, on the wall clock (Task::wall_bound): the instant
  // a replay or a dormant task's wake uses, whatever the clock does meanwhile.
  if (timed) t->pending_value = s_.WallWait(y.wall_deadline);
  if (y.kind == WaitKind::kUntilTime || y.kind == WaitKind::kUntilNext) t->pending_value = y.wall_deadline;
  if (y.kind == WaitKind::kUntilNext && skip_missed_ && j->held_next != 0 && y.wall_deadline <= s_.clock()->WallNs()) {
    t->pending_value = j->held_next;  // the instant missed while down is skipped: the next one from now
  }
  j->held_next = 0;
  s_.Park(t, now);
  if (t->status == TaskStatus::kWaiting && t->wait == y.kind) {
    t->wait_start = mono_start;  // the elapsed time a wake reports counts from the yield
    if (timed) t->pending_value = y.value;
    if (timed && t->timer != 0) {
      t->wall_bound = true;
      t->wall_deadline = y.wall_deadline;
    }
  }
}

bool Replayer::OnWritten(Task* t, int nargs) {
  Journal* j = JournalOf(t);
  if (!j->flushing) return false;
  // A durable wait's record is written (or failed: it goes with the next
  // write): the task waits now, as from its yield.
  j->flushing = false;
  lua_pop(t->co, nargs);
  s_.ClearWait(t);
  ParkJournaled(t, s_.clock()->MonoNs(), j->held_mono_start);
  return true;
}

// tasks.continue_as_new: the coroutine's frames go (its <close> variables
// run), the journal starts again with the new start record, and the entry
// runs again on the same Task with the new arguments (left on its stack:
// *nargs of them, its function below).
bool Replayer::Restart(Task* t, int* nargs) {
  Journal* j = JournalOf(t);
  j->restart = false;
  lua_State* co = t->co;
  {
    LuaHost::Entry entry(s_.host(), co);
    lua_resetthread(co);
  }
  LuaHost::HostSection section(s_.host(), s_.host()->current());
  lua_settop(co, 0);
  lua_rawgeti(co, LUA_REGISTRYINDEX, j->restart_ref);
  luaL_unref(co, LUA_REGISTRYINDEX, j->restart_ref);
  j->restart_ref = LUA_NOREF;
  const auto n = static_cast<int>(lua_rawlen(co, 1));
  if (n < 1 || !lua_checkstack(co, n + 1)) {
    Fail(t, "durable task " + j->id() + ": tasks.continue_as_new: no room for its arguments");
    return false;
  }
  for (int i = 1; i <= n; ++i) lua_rawgeti(co, 1, i);
  lua_remove(co, 1);
  j->Restart(j->restart_start, &writes_);
  j->restart_start.clear();
  j->awaiting = WaitKind::kNone;
  Tell();
  *nargs = n - 1;
  return true;
}

Replayer::Yield Replayer::OnYield(Task* t, int64_t end, int* nargs) {
  const int r = JournalYield(t, end);
  if (r >= 0) {
    *nargs = r;
    return Yield::kReplayed;
  }
  if (r == kDurableFailed) return Yield::kFailed;
  if (r == kParkFlushing) {
    JournalOf(t)->flushing = true;
    s_.ParkWriting(t, end);
    return Yield::kParked;
  }
  if (r == kParkReplayed) {
    const YieldRecord& y = JournalOf(t)->held;
    // The recorded start, on this run's monotonic clock.
    ParkJournaled(t, end, end - (s_.clock()->WallNs() - y.wall_start));
    return Yield::kParked;
  }
  return Yield::kLive;
}

bool Replayer::OnReturn(Task* t) {
  Journal* j = JournalOf(t);
  if (j == nullptr) return false;
  if (j->diverged) {
    Fail(t, j->divergence);  // it caught the divergence's error: it fails all the same
    return true;
  }
  if (j->stopped) {
    s_.KillNow(t);  // replay-only: it caught the stop's error and ended; it stopped all the same
    return true;
  }
  return false;
}

}  // namespace lua_tasks
