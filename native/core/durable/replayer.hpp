// SPDX-License-Identifier: MIT
// Replayer: a runtime's durable tasks, journaled live and read back on replay, behind the scheduler's hooks.
//
// docs/durable.md says what a durable task guarantees; durable_journal.hpp
// what a journal holds. The scheduler owns a Replayer only once something
// durable is asked of it (a store that keeps journals, a durable start), and
// calls it only where a task is durable (Task::durable) or, once a batch,
// for the dormant tasks due: an ephemeral task pays the one flag test.
//
// The hooks are where the scheduler hands values to a durable task or takes
// its yields: a live task's values are recorded there, a replaying task's
// are read back from its journal instead. A durable task's wait on anything
// but IMMEDIATE or a promise is a durable point: its record is written (a
// COMMIT's write, through SchedulerHooks::OnCommit) before the task is filed
// as waiting.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <lua.hpp>

#include "core/durable/activations.hpp"
#include "core/durable/dormant_tasks.hpp"
#include "core/durable/durable_journal.hpp"
#include "core/durable/durable_start.hpp"
#include "core/durable/journal_restore.hpp"
#include "core/durable/kept_ends.hpp"
#include "core/scheduling/task.hpp"
#include "core/store/keyed_store.hpp"

namespace lua_tasks {

class Scheduler;

class Replayer {
 public:
  // `s` owns it and outlives it.
  explicit Replayer(Scheduler* s) : s_(*s) {}
  Replayer(const Replayer&) = delete;
  Replayer& operator=(const Replayer&) = delete;

  // ---- Hooks: the scheduler calls these for a task with Task::durable ----
  // Start: t becomes durable, with s's journal (replayed if it has records).
  void Attach(Task* t, DurableStart s);
  // Release: the task is gone; so is its journal.
  void Released(const Task* t) { journals_.erase(t->key); }
  // RunTask, before a run: the `nargs` values t's wait ended with (on
  // t->co) are recorded. Returns their count (a value that cannot persist
  // may be replaced by why), or -1 if t failed (it ended).
  int ValuesIn(Task* t, int nargs);
  // What t's yield comes to in RunTask: it goes on as any task's (kLive:
  // Park), it replays (kReplayed: the recorded outcome's *nargs values on
  // its stack, run it again), it is filed (kParked) or it ended (kFailed).
  enum class Yield { kLive, kReplayed, kParked, kFailed };
  Yield OnYield(Task* t, int64_t end, int* nargs);
  // RunTask, t's code returned: a task whose replay diverged and whose code
  // caught the error fails all the same; one stopped in a replay-only
  // runtime ends cancelled. True if t did (it ended).
  bool OnReturn(Task* t);
  // EndTask: the end record is written (or every record deleted).
  void OnEnd(Task* t, const TaskEnding& end);
  // FinishCommit: true if the write was that of t's durable wait's record
  // (t is now filed as waiting, the `nargs` values popped); false for a
  // COMMIT's, which continues as any task's.
  bool OnWritten(Task* t, int nargs);
  // Send: the `nargs` values on top of `from` (left there) go to t's inbox.
  // `restored`: the key of a message restored from the store, which is
  // kept as it is. False with *error if a value cannot persist.
  bool OnSend(Task* t, lua_State* from, int nargs, std::string* restored, std::string* error);
  // TakeMessage, t replaying (and not in a step): true with *n as
  // TakeMessage's result (the message t took then, -1 if it waited, -3 if
  // the record does not read); false if t takes from its mailbox live.
  bool ReplayMessage(Task* t, lua_State* L, int* n);
  // TakeMessage took the `n` values on top of L live: its inbox record goes
  // and, outside a step, the message is journaled. Returns n, or -3 (the
  // values popped) if they cannot be journaled.
  int MessageTaken(Task* t, lua_State* L, int n);

  // ---- Runtime-wide hooks ----
  // RunTimers: activates the dormant tasks whose deadline nears, until `batch_end`.
  void ActivateDue(int64_t batch_end);
  bool HasWakes() const { return dormant_.HasWakes(); }
  int64_t NextWake() const { return dormant_.NextWake(); }  // wall ns; HasWakes() must be true
  // CancelAll: the runtime is closing, and the ends it makes are not
  // journaled (the durable tasks go on at the next open).
  void set_closing() { closing_ = true; }
  // The ids of restored tasks (they keep the ids of the run that started
  // them, whose prefix was another) and of retained ends: nullptr / false
  // for an id of this scheduler's.
  const std::string* ForeignId(uint64_t key) const {
    if (foreign_ids_.empty()) return nullptr;
    auto it = foreign_ids_.find(key);
    return it == foreign_ids_.end() ? nullptr : &it->second;
  }
  bool ForeignKey(std::string_view id, uint64_t* key) const;
  // Pushes onto L what a join of `key` gives from a durable task's end
  // record (KeepEnd, or one that ended in this run): (true, result) or
  // (false, error), or (nil, message) if the record does not read.
  // Returns the count; -1 if there is no such record.
  int PushEnd(uint64_t key, lua_State* L) const;

  // ---- Configuration (the embedder's, when it gives the store) ----
  // Whether durable tasks can start: the store keeps keyed writes.
  void set_ok(bool v) { ok_ = v; }
  bool ok() const { return ok_; }
  // Whether a finished durable task's end record is kept (durableRetention)
  // or all its records go.
  void set_retain_ends(bool v) { retain_ends_ = v; }
  // Whether an UNTIL_NEXT instant missed while the runtime was down fires
  // once at open (catch-up, the default) or is skipped for the next one.
  void set_skip_missed(bool v) { skip_missed_ = v; }
  // Whether durable tasks keep an index entry (space 4) that Runtime.open
  // reads instead of their journals (the store can read a task's journal
  // when it is needed: docs/durable.md#restore-at-open).
  void set_indexed(bool v) { indexed_ = v; }
  bool indexed() const { return indexed_; }
  // Whether the store reads a dormant task's journal asynchronously: a call
  // that names one starts the read (SchedulerHooks::OnActivate) and the task
  // is among activations() until it is restored (Activated).
  void set_async_reads(bool v) { async_reads_ = v; }
  bool async_reads() const { return async_reads_; }
  // The payload of the index's mark (kIndexMarkDefault; a leased store's
  // names the lease: docs/durable.md#restore-at-open).
  void set_index_mark(std::string payload) { mark_payload_ = std::move(payload); }
  // A replay-only runtime (`lua-tasks replay`, docs/operations.md#a-deploy-check):
  // each durable task replays its journal and stops where the journal ends,
  // at its wait or at the first thing it would do live (a JS call, a step, a
  // clock read, a yield), ending cancelled; nothing runs live, no record is
  // written, an end is not journaled. A divergence fails it as usual.
  void set_replay_only(bool v) { replay_only_ = v; }
  bool replay_only() const { return replay_only_; }

  // ---- The store's side (the embedder's) ----
  // The journal records written since the last take (keyed writes of
  // spaces 2, 3 and 4). SchedulerHooks::OnJournal is called once when
  // there are some, until the take.
  std::vector<StoreWrite> TakeWrites();
  // A write that failed: its records go ahead of the newer ones.
  void PutBackWrites(std::vector<StoreWrite> writes);
  // Restores a message of a restored durable task's inbox (space 3, `key`)
  // into its mailbox: the values on top of `from` (popped). False if the
  // task is not there.
  bool RestoreMessage(uint64_t key, std::string inbox_key, lua_State* from, int nargs);
  // Restores the inbox Runtime.open read for the restored task `key` into
  // its mailbox, oldest first (RestoreMessage for each), L as scratch
  // under a HostSection. False with *error naming the first message that
  // is damaged or does not read (those before it are restored).
  bool RestoreInbox(uint64_t key, JournalRestore::Inbox inbox, lua_State* L, std::string* error);
  // Deletes the end record of a finished durable task past its retention.
  void Forget(std::string_view id);
  // The end record (its payload) of a durable task that finished before
  // this run and is retained: a join on its id answers from it. Its id
  // parses from now on (to a key of this run).
  void KeepEnd(std::string_view id, std::string payload);
  // Writes every unfinished durable task's index entry as it stands, moves
  // the end records of the `ended` tasks (id, its record 0 as stored) into
  // the index, then writes the index's mark: the index of a name written
  // without one.
  void WriteIndex(const std::vector<std::pair<std::string, std::string>>& ended);
  // The durable tasks Runtime.open left in the store.
  DormantTasks& dormant() { return dormant_; }
  const DormantTasks& dormant() const { return dormant_; }
  // With async_reads(): whether `id` is being read, its read started now if
  // it was dormant.
  bool Activating(std::string_view id);
  Activations& activations() { return activations_; }
  const Activations& activations() const { return activations_; }
  // The read of `id` ended (its task was started, or could not be): the
  // tasks that waited for it go on, and make their calls again.
  void Activated(std::string_view id);
  // Writes the index's mark now (an open that found the index complete
  // writes it again under its own lease).
  void WriteIndexMark();
  // Live durable tasks.
  size_t count() const { return journals_.size(); }

  // ---- Journals (the Lua API's and the addon's JS calls) ----
  Journal* JournalOf(const Task* t) const {
    if (!t->durable) return nullptr;
    auto it = journals_.find(t->key);
    return it == journals_.end() ? nullptr : it->second.get();
  }
  // Whether t replays and its journal's next record is a yield of `kind`.
  bool ReplaysWait(const Task* t, WaitKind kind) const;
  // Whether t replays and its journal's next record is a message it took.
  bool ReplaysMessage(const Task* t) const;
  // Marks the running durable task's replay diverged (it fails at its next
  // yield or end whatever the code does) and returns the message: what the
  // journal holds at its position and what the code did (`now`).
  const std::string& Diverge(Journal* j, const char* now);
  // In a replay-only runtime, j's code went past its journal's end to do
  // `now` live: marks the task to stop (it does at its next yield or end,
  // whatever the code does) and returns the message to raise.
  const std::string& StopReplay(Journal* j, const char* now);
  // Appends a record to j (the embedder's: a JS call's outcome), with a
  // call's or step's identity if given.
  void AppendRecord(Journal* j, RecordKind kind, std::string_view payload,
                    std::optional<std::string_view> identity = std::nullopt);
  // Encodes the n values on L's top as a payload for a record of j, within
  // maxValueBytes and what maxJournalBytes leaves it (persist_limits.hpp).
  // False with *error; *limit says a limit refused it (ERR_STORE_LIMIT).
  // Caller holds a HostSection.
  bool EncodeRecord(Journal* j, lua_State* L, int n, std::string* payload, std::string* error, bool* limit = nullptr);
  // Whether a record of `bytes` payload bytes fits j's limits; else *error.
  bool RecordFits(Journal* j, size_t bytes, std::string* error) const;

 private:
  // ---- Yields and waits (replayer_yield.cpp) ----
  // What JournalYield does with the yield: >= 0, values of the recorded
  // outcome pushed (replay); else one of these.
  static constexpr int kParkAsUsual = -1;
  static constexpr int kParkReplayed = -2;  // the journal ends at this wait: its recorded deadline
  static constexpr int kParkFlushing = -3;  // its record is written first (Scheduler::ParkWriting)
  static constexpr int kDurableFailed = -4;
  int JournalYield(Task* t, int64_t now);
  // Waits a durable task's record must be durable for before it is
  // reported waiting: those that can last (docs/durable.md#durable-points).
  static bool IsDurablePoint(WaitKind k);
  // Files the held wait of t's journal with its recorded deadline.
  // `mono_start`: when the wait began on this run's monotonic clock.
  void ParkJournaled(Task* t, int64_t now, int64_t mono_start);
  // Ends t failed with an ERR_NONDETERMINISM error of `message`.
  void Fail(Task* t, const std::string& message);
  bool Restart(Task* t, int* nargs);  // tasks.continue_as_new

  // ---- Writes ----
  void Tell();  // SchedulerHooks::OnJournal, once until TakeWrites

  Scheduler& s_;
  // Durable tasks' journals by key.
  std::unordered_map<uint64_t, std::unique_ptr<Journal>> journals_;
  std::vector<StoreWrite> writes_;  // not taken yet, in order
  bool told_ = false;
  bool closing_ = false;
  bool ok_ = false;
  bool replay_only_ = false;
  bool retain_ends_ = true;
  bool skip_missed_ = false;
  bool indexed_ = false;
  bool mark_pending_ = false;  // WriteIndex found nothing: the mark goes with the first entry
  bool async_reads_ = false;
  std::string mark_payload_ = kIndexMarkDefault;
  DormantTasks dormant_;
  Activations activations_;
  std::unordered_map<uint64_t, std::string> foreign_ids_;
  std::unordered_map<std::string, uint64_t> foreign_keys_;
  // Durable tasks that ended and are retained: their end records' payloads
  // by key, what a join answers once this run's recent outcomes forgot them
  // (or they ended before this run). Dropped with the runtime.
  KeptEnds ended_;
};

}  // namespace lua_tasks
