// SPDX-License-Identifier: MIT
// Journal: what entered one durable task from outside, in order, so that the task can run again to where it was.
//
// Stock Lua cannot serialize a suspended coroutine, so a durable task is
// made durable by replay (docs/durable.md): its journal records its entry
// and, in order, every value that came in from outside (a wait's outcome, a
// JS call's result, a step's results, a clock or random read, a message).
// After a restart the task runs again from its entry and each recorded value
// is handed back in order, without waiting and without calling out; where
// the journal ends the task goes on live.
//
// The records' format (kinds, keys, framing, payloads) is durable_record.hpp's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <lua.hpp>

#include "core/base/ring_queue.hpp"
#include "core/durable/durable_record.hpp"
#include "core/scheduling/yield_instruction.hpp"
#include "core/store/keyed_store.hpp"

namespace lua_tasks {

class Journal {
 public:
  // `replay`: the records of an earlier run, the start record first (empty
  // for a new task).
  Journal(std::string id, std::vector<std::string> replay);

  const std::string& id() const { return id_; }
  // Records written so far (the next record's seq).
  size_t size() const { return seq_; }
  // Bytes of this run's records (replayed and appended), each its payload
  // and kRecordOverhead: what maxJournalBytes bounds (persist_limits.hpp).
  size_t bytes() const { return bytes_; }
  // What a record costs the store beyond its payload (its key, kind and
  // checksum, about): a loop of tiny records is bounded by count too.
  static constexpr size_t kRecordOverhead = 32;

  // ---- Replay ----
  bool replaying() const { return cursor_ < replay_.size(); }
  RecordKind next_kind() const { return static_cast<RecordKind>(replay_[cursor_][0]); }
  size_t position() const { return cursor_; }
  // The next record's payload; advances. Frees the replayed records once all are read.
  std::string_view Next();
  std::string_view Peek() const { return std::string_view(replay_[cursor_]).substr(1); }
  void EndReplay();

  // ---- Live ----
  // Appends a record (seq size()) and its keyed write to *out; `identity`
  // (a kCall's or kStep's, at most kMaxIdentity bytes) goes before the payload.
  void Append(RecordKind kind, std::string_view payload, std::vector<StoreWrite>* out,
              std::optional<std::string_view> identity = std::nullopt);
  // The task ended: deletes of its records into *out; with `end` (an end
  // record's payload) that end record is kept while finished tasks are
  // retained (docs/durable.md#retention): as its index entry when
  // `indexed`, else as its record 0.
  void Finish(const std::string* end, bool indexed, std::vector<StoreWrite>* out) const;
  // Its index entry (space 4): waiting on `wait`, or running (nullptr).
  void Index(const YieldRecord* wait, std::vector<StoreWrite>* out) const;
  // A new run of the same task (tasks.continue_as_new): every record goes
  // and `start` becomes record 0.
  void Restart(std::string_view start, std::vector<StoreWrite>* out);

  // The idempotency key it was started with, if any (its end record keeps it).
  std::optional<std::string> key;
  // Its label (the name rt.spawn gave it), if any: its start record keeps
  // it, and its end record and a continue-as-new's start record again.
  std::optional<std::string> label;
  std::string entry;  // its entry's name: a continue-as-new runs it again
  // ---- Inbox (messages sent and not yet received, space 3) ----
  // A message sent to the task: its record into *out, its key kept until it
  // is received.
  void AddMessage(std::string_view payload, std::vector<StoreWrite>* out);
  // A message restored from the store (Runtime.open): its key, as stored.
  void AddRestoredMessage(std::string stored_key) { inbox.push_back(std::move(stored_key)); }
  // The oldest message was received: its record's delete into *out (the
  // batch that journals the receipt). False if the inbox is empty.
  bool MessageReceived(std::vector<StoreWrite>* out);

  // The inbox: the keys of the messages in its mailbox, oldest first, and
  // the seq the next one gets. (A ring allocates nothing until a message
  // comes; an empty std::deque holds ~600 bytes, a durable task's largest
  // part while it waits.)
  RingQueue<std::string> inbox;
  uint64_t inbox_seq = 0;
  // tasks.continue_as_new asked for a new run: its start record, and the
  // registry reference of { fn, args... } to run.
  bool restart = false;
  std::string restart_start;
  int restart_ref = LUA_NOREF;
  // The wait whose outcome is recorded next (kNone: none: a first run, a
  // preemption's continuation).
  WaitKind awaiting = WaitKind::kNone;
  // The COMMIT awaited has no yield record: its outcome is recorded only if
  // it failed (kCommitFailed).
  bool unrecorded_commit = false;
  // COMMITs that landed since the last record (appended, or read by the
  // replay): a failed COMMIT's record keeps the count, so a replay tells it
  // from the COMMITs before it, which left none. Append and Next reset it.
  uint64_t landed_commits = 0;
  // A wait that waits for its record to be durable (the task is committing meanwhile).
  bool flushing = false;
  YieldRecord held;
  int64_t held_next = 0;  // a replayed UNTIL_NEXT: its next instant from now (skipping those missed)
  int64_t held_mono_start = 0;
  // The identity of the JS call whose promise the task awaits: its record
  // is written when the promise settles (none: tasks.await of a promise).
  std::optional<std::string> awaiting_call;
  // Inside tasks.step: what the step reads (JS calls, clocks, messages) is
  // not journaled on its own; the step's results are the record.
  int in_step = 0;
  // Replay met code that did something else: the task fails at its next
  // yield or end, even if the code caught the error.
  bool diverged = false;
  std::string divergence;
  // A replay-only runtime (Replayer::set_replay_only): the replay reached
  // the journal's end and the code went to do something live; the task
  // stops at its next yield or end, even if the code caught the error.
  bool stopped = false;
  std::string stop;

 private:
  std::string id_;
  std::vector<std::string> replay_;
  size_t cursor_ = 0;
  // Where in the writes not taken yet its last index write stands (if it
  // still does: PutIndex checks), so that a newer one replaces it.
  mutable size_t index_pos_ = SIZE_MAX;
  void PutIndex(std::optional<std::string> value, std::vector<StoreWrite>* out) const;
  size_t seq_ = 0;
  size_t bytes_ = 0;
};

}  // namespace lua_tasks
