// SPDX-License-Identifier: MIT
// The scheduler's side of durable tasks: journaling what enters them, replaying it, durable waits.
//
// docs/durable.md says what a durable task guarantees; durable_journal.hpp
// what a journal holds. The hooks here are where the scheduler hands values
// to a task or takes its yields (RunTask, FinishCommit, TakeMessage,
// EndTask): a live task's values are recorded there, a replaying task's are
// read back from its journal instead. A durable task's wait on anything but
// IMMEDIATE or a promise is a durable point: its record is written (a
// COMMIT's write, through OnCommit) before the task is filed as waiting.
#include <algorithm>
#include <cstdlib>

#include "core/base/coded_error.hpp"
#include "core/scheduling/scheduler.hpp"

namespace lua_tasks {

namespace {

// Waits a durable task's record must be durable for before it is reported
// waiting: those that can last (docs/durable.md#durable-points).
bool WaitIsDurablePoint(WaitKind k) {
  return k == WaitKind::kFor || k == WaitKind::kUntilTime || k == WaitKind::kUntilNext ||
         k == WaitKind::kIndefinitely || k == WaitKind::kReceive || k == WaitKind::kJoin;
}

// Whether a replayed yield is the one recorded: the instruction, and the
// arguments that the code gives (not those computed from the clock: an
// UNTIL_NEXT's next instant, a joined task's key in this run).
bool SameYield(const YieldRecord& was, WaitKind kind, int64_t value) {
  if (was.kind != kind) return false;
  if (kind == WaitKind::kFor || kind == WaitKind::kUntilTime || kind == WaitKind::kReceive) return was.value == value;
  return true;
}

}  // namespace

void Scheduler::PrepareDurable(std::string id, std::string start, std::vector<std::string> records, std::string entry,
                               std::optional<std::string> key) {
  next_durable_ = true;
  next_entry_ = std::move(entry);
  next_key_text_ = std::move(key);
  next_id_ = std::move(id);
  next_start_ = std::move(start);
  next_records_ = std::move(records);
}

void Scheduler::AttachJournal(Task* t) {
  std::string id = next_id_.empty() ? IdOf(t->key) : std::move(next_id_);
  uint64_t parsed = 0;
  if (!ParseId(id, &parsed) || parsed != t->key) {
    foreign_ids_[t->key] = id;
    foreign_keys_[id] = t->key;
  }
  auto j = std::make_unique<Journal>(std::move(id), std::move(next_records_));
  j->key = std::move(next_key_text_);
  if (j->size() == 0) {
    j->Append(RecordKind::kStart, next_start_, &journal_writes_);
    if (indexed_) j->Index(nullptr, &journal_writes_);
    if (mark_pending_) WriteIndexMark();
    TellJournal();
  }
  j->entry = std::move(next_entry_);
  next_entry_.clear();
  next_key_text_.reset();
  next_id_.clear();
  next_start_.clear();
  next_records_.clear();
  t->durable = true;
  journals_[t->key] = std::move(j);
}

bool Scheduler::ReplaysWait(const Task* t, WaitKind kind) const {
  const Journal* j = JournalOf(t);
  if (j == nullptr || j->in_step > 0 || !j->replaying() || j->next_kind() != RecordKind::kYield) return false;
  YieldRecord y;
  return DecodeYield(j->Peek(), &y) && y.kind == kind;
}

bool Scheduler::ReplaysMessage(const Task* t) const {
  const Journal* j = JournalOf(t);
  return j != nullptr && j->in_step == 0 && j->replaying() && j->next_kind() == RecordKind::kMessage;
}

std::vector<SpacedWrite> Scheduler::TakeJournalWrites() {
  journal_told_ = false;
  std::vector<SpacedWrite> out;
  out.swap(journal_writes_);
  return out;
}

void Scheduler::PutBackJournalWrites(std::vector<SpacedWrite> writes) {
  writes.insert(writes.end(), std::make_move_iterator(journal_writes_.begin()),
                std::make_move_iterator(journal_writes_.end()));
  journal_writes_ = std::move(writes);
  TellJournal();
}

void Scheduler::TellJournal() {
  // A replay-only runtime writes nothing (it has no store to write to).
  if (journal_told_ || journal_writes_.empty() || replay_only_) return;
  journal_told_ = true;
  hooks_->OnJournal();
}

void Scheduler::AppendRecord(Journal* j, RecordKind kind, std::string_view payload,
                             std::optional<std::string_view> identity) {
  j->Append(kind, payload, &journal_writes_, identity);
  TellJournal();
}

namespace {

// `size`: the record's size as known ("300 bytes", "more than 300 bytes").
std::string JournalFull(const Journal& j, const std::string& size, size_t limit) {
  return "a record of " + size + " would take its journal past " + std::to_string(limit) + " bytes (it holds " +
         std::to_string(j.bytes()) + "); " + LimitAdvice("maxJournalBytes", limit) +
         ", or end this run with tasks.continue_as_new(...) to start the task again with an empty journal";
}

}  // namespace

bool Scheduler::RecordFits(Journal* j, size_t bytes, std::string* error) const {
  const PersistLimits& limits = persist_limits_;
  if (bytes > limits.value_bytes) {
    *error = "a record of " + std::to_string(bytes) + " bytes; " + LimitAdvice("maxValueBytes", limits.value_bytes);
    return false;
  }
  const size_t cost = bytes + Journal::kRecordOverhead;
  if (cost > limits.journal_bytes || j->bytes() > limits.journal_bytes - cost) {
    *error = JournalFull(*j, std::to_string(bytes) + " bytes", limits.journal_bytes);
    return false;
  }
  return true;
}

bool Scheduler::EncodeRecord(Journal* j, lua_State* L, int n, std::string* payload, std::string* error, bool* limit) {
  const PersistLimits& limits = persist_limits_;
  const size_t used = j->bytes() + Journal::kRecordOverhead;
  const size_t room = used < limits.journal_bytes ? limits.journal_bytes - used : 0;
  CodecFailure failure;
  const bool ok = EncodeValues(L, n, payload, error, limits.Encoding(host_, room), &failure);
  if (limit != nullptr) *limit = failure == CodecFailure::kTooLarge;
  if (failure == CodecFailure::kTooLarge) {
    *error = room < limits.value_bytes
                 ? JournalFull(*j, "more than " + std::to_string(room) + " bytes", limits.journal_bytes)
                 : *error + ": " + LimitAdvice("maxValueBytes", limits.value_bytes);
  }
  return ok;
}

const std::string& Scheduler::Diverge(Journal* j, const char* now) {
  if (!j->diverged) {
    j->diverged = true;
    const size_t at = j->position();
    std::string recorded = "the journal's end";
    if (j->replaying()) recorded = DescribeRecord(j->next_kind(), j->Peek());
    j->divergence = "durable task " + j->id() + " diverged from its journal at record " + std::to_string(at) +
                    ": the journal holds " + recorded + ", the code now made " + now +
                    " (code changed under a running durable task: see docs/durable.md#changing-code)";
  }
  return j->divergence;
}

const std::string& Scheduler::StopReplay(Journal* j, const char* now) {
  if (!j->stopped) {
    j->stopped = true;
    j->stop = "durable task " + j->id() + ": its replay reached the end of its journal (" + std::to_string(j->size()) +
              " records) and the code now made " + now + ": a replay-only runtime runs nothing live";
  }
  return j->stop;
}

void Scheduler::FailDurable(Task* t, const std::string& message) {
  LuaHost::HostSection section(host_, host_->current());
  ClearWait(t);
  t->status = TaskStatus::kRunning;
  {
    LuaHost::Entry entry(host_, t->co);
    lua_resetthread(t->co);
  }
  lua_settop(t->co, 0);
  PushCodedError(t->co, ErrorCode::kNondeterminism, message.c_str());
  EndTask(t, {TaskEnd::kFailed, LUA_ERRRUN, 1});
}

int Scheduler::JournalIn(Task* t, int nargs) {
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
    LuaHost::HostSection section(host_, host_->current());
    ok = EncodeRecord(j, t->co, nargs, &payload, &error);
    if (!ok && (w == WaitKind::kPromise || w == WaitKind::kCommit) && nargs == 2 && !lua_toboolean(t->co, -2)) {
      // A rejection whose error cannot persist (a JS error object): the
      // task gets it as it is; the journal keeps its message, which a
      // replay raises.
      lua_pushboolean(t->co, 0);
      PushErrorMessage(t->co, -2);
      ok = EncodeValues(t->co, 2, &payload, &error);
      lua_pop(t->co, 2);
    } else if (!ok && (w == WaitKind::kPromise || w == WaitKind::kCommit)) {
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
    FailDurable(t, "durable task " + j->id() + ": the values it was resumed with cannot be journaled: " + error);
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
  if (indexed_ && WaitIsDurablePoint(w)) j->Index(nullptr, &journal_writes_);
  return nargs;
}

int Scheduler::JournalYield(Task* t, int64_t now) {
  Journal* j = JournalOf(t);
  if (j == nullptr) return kParkAsUsual;
  if (j->diverged) {
    FailDurable(t, j->divergence);
    return kDurableFailed;
  }
  if (j->stopped) {
    KillNow(t);
    return kDurableFailed;
  }
  if (j->restart) {  // tasks.continue_as_new
    int nargs = 0;
    if (!RestartDurable(t, &nargs)) return kDurableFailed;
    return nargs;
  }
  if (!t->has_pending) return kParkAsUsual;  // a preemption: not the code's, not journaled
  const WaitKind kind = t->pending_kind;
  // Replay-only: a wait past the journal's end, or on a promise (JS at work), is live.
  if (replay_only_ && (kind == WaitKind::kPromise || !j->replaying())) {
    StopReplay(j, (std::string("a yield (") + WaitKindName(kind) + ")").c_str());
    KillNow(t);
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
  y.wall_start = clock_->WallNs();
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
      LuaHost::HostSection section(host_, host_->current());
      n = PushValues(t->co, values, &error, Decoding(host_));
    }
    if (!j->replaying()) j->EndReplay();
    if (n < 0) {
      FailDurable(t, "durable task " + j->id() + ": a journal record does not read: " + error);
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
      LuaHost::HostSection section(host_, host_->current());
      room = lua_checkstack(t->co, 2) != 0;
      if (room) {
        lua_pushboolean(t->co, 1);
        lua_pushnil(t->co);
      }
    }
    if (!room) {
      FailDurable(t, "durable task " + j->id() + ": no stack room to replay a COMMIT");
      return kDurableFailed;
    }
    return 2;
  }
  if (j->replaying()) {
    if (!recorded || !SameYield(was, kind, y.value)) {
      FailDurable(t, Diverge(j, (std::string("a yield (") + WaitKindName(kind) + ")").c_str()));
      return kDurableFailed;
    }
    j->Next();
    if (j->replaying()) {
      if (j->next_kind() != RecordKind::kIn) {
        FailDurable(t, Diverge(j, "a wait's outcome"));
        return kDurableFailed;
      }
      return replay_outcome(j->Next());
    }
    if (replay_only_) {  // the journal ends at this wait: where a replay-only run stops
      StopReplay(j, (std::string("its wait, a yield (") + WaitKindName(kind) + ")").c_str());
      KillNow(t);
      return kDurableFailed;
    }
    // The journal ends at this wait: the task waits again, with the deadline it had.
    j->EndReplay();
    j->awaiting = kind;
    j->held = was;
    j->held_next = y.value;
    return kParkReplayed;
  }
  if (kind == WaitKind::kCommit) {
    // No record unless it fails (JournalIn): a step + COMMIT journals the step alone.
    j->awaiting = kind;
    j->unrecorded_commit = true;
    return kParkAsUsual;
  }
  AppendRecord(j, RecordKind::kYield, EncodeYield(y));
  j->awaiting = kind;
  if (!WaitIsDurablePoint(kind)) return kParkAsUsual;
  if (indexed_) j->Index(&y, &journal_writes_);
  j->held = y;
  j->held_mono_start = now;
  return kParkFlushing;
}

// Files the held wait of t's journal with its recorded deadline. `mono_start`:
// when the wait began on this run's monotonic clock.
void Scheduler::ParkJournaled(Task* t, int64_t now, int64_t mono_start) {
  Journal* j = JournalOf(t);
  const YieldRecord& y = j->held;
  const bool timed = y.kind == WaitKind::kFor || (y.kind == WaitKind::kReceive && y.value >= 0);
  t->Pend(y.kind, y.value, y.unit);
  if (timed) t->pending_value = std::max<int64_t>(0, mono_start + y.value - now);
  if (y.kind == WaitKind::kUntilTime || y.kind == WaitKind::kUntilNext) t->pending_value = y.wall_deadline;
  if (y.kind == WaitKind::kUntilNext && skip_missed_ && j->held_next != 0 && y.wall_deadline <= clock_->WallNs()) {
    t->pending_value = j->held_next;  // the instant missed while down is skipped: the next one from now
  }
  j->held_next = 0;
  Park(t, now);
  if (t->status == TaskStatus::kWaiting && t->wait == y.kind) {
    t->wait_start = mono_start;  // the elapsed time a wake reports counts from the yield
    if (timed) t->pending_value = y.value;
  }
}

void Scheduler::ParkFlushing(Task* t, int64_t now) {
  Journal* j = JournalOf(t);
  j->flushing = true;
  t->has_pending = false;
  t->status = TaskStatus::kWaiting;
  t->wait = WaitKind::kCommit;
  ++t->gen;
  t->wait_start = now;
  last_park_ = now;
  ++outside_waits_;
  hooks_->OnCommit(*t);  // FinishCommit files the held wait
}

void Scheduler::JournalEnd(Task* t, const TaskEnding& end) {
  auto it = journals_.find(t->key);
  if (it == journals_.end()) return;
  Journal* j = it->second.get();
  if (j->restart_ref != LUA_NOREF) {
    luaL_unref(host_->main(), LUA_REGISTRYINDEX, j->restart_ref);
    j->restart_ref = LUA_NOREF;
  }
  // Closing: the task goes on at the next open. Diverged: its journal stays
  // for code that replays it (docs/durable.md#changing-code).
  // Replay-only: nothing is written.
  if (closing_ || j->diverged || replay_only_) return;
  if (!retain_ends_) {
    j->Finish(nullptr, indexed_, &journal_writes_);
    TellJournal();
    return;
  }
  // The end record: status, key, when (wall ms), the result or the error's
  // message (nil if it cannot persist).
  LuaHost::HostSection section(host_, host_->current());
  lua_State* co = t->co;
  const int top = lua_gettop(co);
  EndRecord record;
  record.status = end.kind == TaskEnd::kDone ? "done" : end.kind == TaskEnd::kFailed ? "failed" : "cancelled";
  record.key = &j->key;
  record.ended_ms = clock_->WallNs() / 1000000;
  if (end.kind == TaskEnd::kDone && end.nres > 0) {
    record.result = top - end.nres + 1;
  } else if (end.kind == TaskEnd::kFailed && end.nres > 0) {
    record.result = top;
    record.error = true;
  }
  std::string payload;
  // No room: its journal stays, and a restart ends it again.
  if (!EncodeEndRecord(co, record, &payload, persist_limits_.Encoding(host_))) return;
  j->Finish(&payload, indexed_, &journal_writes_);
  TellJournal();
}

// tasks.continue_as_new: the coroutine's frames go (its <close> variables
// run), the journal starts again with the new start record, and the entry
// runs again on the same Task with the new arguments (left on its stack:
// *nargs of them, its function below).
bool Scheduler::RestartDurable(Task* t, int* nargs) {
  Journal* j = JournalOf(t);
  j->restart = false;
  lua_State* co = t->co;
  {
    LuaHost::Entry entry(host_, co);
    lua_resetthread(co);
  }
  LuaHost::HostSection section(host_, host_->current());
  lua_settop(co, 0);
  lua_rawgeti(co, LUA_REGISTRYINDEX, j->restart_ref);
  luaL_unref(co, LUA_REGISTRYINDEX, j->restart_ref);
  j->restart_ref = LUA_NOREF;
  const auto n = static_cast<int>(lua_rawlen(co, 1));
  if (n < 1 || !lua_checkstack(co, n + 1)) {
    FailDurable(t, "durable task " + j->id() + ": tasks.continue_as_new: no room for its arguments");
    return false;
  }
  for (int i = 1; i <= n; ++i) lua_rawgeti(co, 1, i);
  lua_remove(co, 1);
  j->Restart(j->restart_start, &journal_writes_);
  j->restart_start.clear();
  j->awaiting = WaitKind::kNone;
  TellJournal();
  *nargs = n - 1;
  return true;
}

bool Scheduler::RestoreMessage(uint64_t key, std::string inbox_key, lua_State* from, int nargs) {
  Task* t = Find(key);
  Journal* j = t == nullptr ? nullptr : JournalOf(t);
  if (j == nullptr) {
    lua_pop(from, nargs);
    return false;
  }
  // Later messages get later keys than the restored ones.
  uint64_t seq = 0;
  if (RecordSeq(inbox_key, &seq)) j->inbox_seq = std::max(j->inbox_seq, seq + 1);
  restoring_inbox_key_ = std::move(inbox_key);
  const SendResult r = Send(key, from, nargs);
  restoring_inbox_key_.reset();
  return r == SendResult::kQueued;
}

void Scheduler::ForgetDurable(std::string_view id) {
  // Its end record: record 0, or its index entry.
  journal_writes_.push_back({kJournalSpace, RecordKey(id, 0), std::nullopt});
  if (indexed_) journal_writes_.push_back({kIndexSpace, std::string(id), std::nullopt});
  TellJournal();
}

void Scheduler::WriteIndex(const std::vector<std::pair<std::string, std::string>>& ended) {
  for (const auto& [id, record] : ended) {
    journal_writes_.push_back({kIndexSpace, id, record});
    journal_writes_.push_back({kJournalSpace, RecordKey(id, 0), std::nullopt});
  }
  for (const auto& [key, j] : journals_) {
    const Task* t = tasks_.Find(key);
    // A wait whose record is being written (flushing) is filed when it is.
    const bool waits =
        j->flushing || (t != nullptr && t->status == TaskStatus::kWaiting && WaitIsDurablePoint(t->wait));
    j->Index(waits ? &j->held : nullptr, &journal_writes_);
  }
  // Nothing to index (a new name): the mark goes with the first entry,
  // so a runtime without durable tasks writes no batch for it.
  if (journals_.empty() && ended.empty()) {
    mark_pending_ = true;
    return;
  }
  WriteIndexMark();
}

void Scheduler::WriteIndexMark() {
  mark_pending_ = false;
  journal_writes_.push_back({kIndexSpace, kIndexMarkKey, SealRecord(RecordKind::kIndex, "mark")});
  TellJournal();
}

void Scheduler::ActivateDue(int64_t batch_end) {
  while (locks_ == 0 && !host_->terminating() && clock_->MonoNs() < batch_end) {
    std::optional<std::string> id = dormant_.PopDue(clock_->WallNs());
    if (!id) return;
    hooks_->OnActivate(*id);
  }
}

Scheduler::DurableYield Scheduler::OnDurableYield(Task* t, int64_t end, int* nargs) {
  const int r = JournalYield(t, end);
  if (r >= 0) {
    *nargs = r;
    return DurableYield::kReplayed;
  }
  if (r == kDurableFailed) return DurableYield::kFailed;
  if (r == kParkFlushing) {
    ParkFlushing(t, end);
    return DurableYield::kParked;
  }
  if (r == kParkReplayed) {
    const YieldRecord& y = JournalOf(t)->held;
    // The recorded start, on this run's monotonic clock.
    ParkJournaled(t, end, end - (clock_->WallNs() - y.wall_start));
    return DurableYield::kParked;
  }
  return DurableYield::kLive;
}

bool Scheduler::FailIfDiverged(Task* t) {
  Journal* j = JournalOf(t);
  if (j == nullptr) return false;
  if (j->diverged) {
    FailDurable(t, j->divergence);  // it caught the divergence's error: it fails all the same
    return true;
  }
  if (j->stopped) {
    KillNow(t);  // replay-only: it caught the stop's error and ended; it stopped all the same
    return true;
  }
  return false;
}

}  // namespace lua_tasks
