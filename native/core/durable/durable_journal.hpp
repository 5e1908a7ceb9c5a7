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
// A record is one byte of kind, then its payload (a yield's fields, or the
// codec's bytes of a table { n = count, values... }), then the CRC-32C of
// both, 4 bytes little-endian: a damaged record is refused, never replayed.
// A JS call's or a step's payload may start with its identity (what the code
// called, checked on replay: docs/durable.md#changing-code); records written
// before identities existed have none and replay unchecked. Records are stored as
// keyed writes in space 2 under "<task id>/<seq, 10 digits>" (docs/design.md
// #the-store-interface), so a task's records sort in order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <lua.hpp>

#include "core/codec/state_codec.hpp"
#include "core/scheduling/yield_instruction.hpp"
#include "core/store/keyed_store.hpp"

namespace lua_tasks {

enum class RecordKind : char {
  kStart = 'A',    // the entry (a global name or mod.fn path), its arguments, the idempotency key
  kYield = 'Y',    // a yield instruction the task waited on (YieldRecord)
  kIn = 'I',       // the values that wait ended with
  kCall = 'C',     // a JS function's outcome: its name, then ok, then its value or error message
  kStep = 'S',     // tasks.step's results, after its name if it has one
  kValue = 'V',    // a clock or random read, or a tasks call on other tasks
  kMessage = 'M',  // a message taken from the mailbox
  kEnd = 'E',      // how the task ended (written as the task's records are deleted)
  kPatch = 'P',    // tasks.patched(name) said true: code newer than the task's start
};
const char* RecordKindName(RecordKind kind);

// A yield as recorded: the instruction and, for timed waits, its absolute
// deadline on the wall clock, which a replay keeps.
struct YieldRecord {
  WaitKind kind = WaitKind::kNone;
  Unit unit = Unit::kSeconds;
  int64_t value = 0;          // Task::pending_value at the yield (duration, target, timeout, -1)
  int64_t wall_start = 0;     // wall ns at the yield
  int64_t wall_deadline = 0;  // wall ns the wait ends (0: no deadline)
};

// The spaces of a durable task's records in the store (docs/design.md#the-store-interface).
inline constexpr int kJournalSpace = 2;
inline constexpr int kInboxSpace = 3;  // messages sent to it and not yet received

// A write of a durable task's records: its space, key, and sealed record (none: delete).
struct SpacedWrite {
  int space = kJournalSpace;
  std::string key;
  std::optional<std::string> value;
};

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
  void Append(RecordKind kind, std::string_view payload, std::vector<SpacedWrite>* out,
              std::optional<std::string_view> identity = std::nullopt);
  // The task ended: deletes of its records into *out; with `end` (an end
  // record's payload) record 0 becomes that end record instead, kept while
  // finished tasks are retained (docs/durable.md#retention).
  void Finish(const std::string* end, std::vector<SpacedWrite>* out) const;
  // A new run of the same task (tasks.continue_as_new): every record goes
  // and `start` becomes record 0.
  void Restart(std::string_view start, std::vector<SpacedWrite>* out);
  // A record as stored: kind, identity if any, payload, CRC.
  static std::string Seal(RecordKind kind, std::string_view payload,
                          std::optional<std::string_view> identity = std::nullopt);
  // The longest identity a record keeps (its length is one byte); longer
  // JS function names are cut, longer step names refused.
  static constexpr size_t kMaxIdentity = 255;
  // A record's payload without its identity, which goes to *identity (none
  // in a record written without one: an unnamed step, an older version).
  static std::string_view SplitIdentity(std::string_view payload, std::optional<std::string_view>* identity);
  // What a call or step with `identity` is, for a divergence message
  // ("a JS call to grant", "tasks.step \"pay\"").
  static std::string DescribeIdentity(RecordKind kind, std::optional<std::string_view> identity);

  static std::string KeyOf(std::string_view id, size_t seq);
  // A stored record checked and its CRC taken off; false if it is damaged.
  static bool Unseal(std::string* record);
  static std::string EncodeYield(const YieldRecord& y);
  static bool DecodeYield(std::string_view payload, YieldRecord* y);
  // What a record's payload says, for a divergence message.
  static std::string Describe(RecordKind kind, std::string_view payload);

  // The idempotency key it was started with, if any (its end record keeps it).
  std::optional<std::string> key;
  std::string entry;  // its entry's name: a continue-as-new runs it again
  // The inbox: the keys of the messages in its mailbox, oldest first, and
  // the seq the next one gets.
  std::deque<std::string> inbox;
  uint64_t inbox_seq = 0;
  // tasks.continue_as_new asked for a new run: its start record, and the
  // registry reference of { fn, args... } to run.
  bool restart = false;
  std::string restart_start;
  int restart_ref = LUA_NOREF;
  // The wait whose outcome is recorded next (kNone: none: a first run, a
  // preemption's continuation).
  WaitKind awaiting = WaitKind::kNone;
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

 private:
  std::string id_;
  std::vector<std::string> replay_;
  size_t cursor_ = 0;
  size_t seq_ = 0;
  size_t bytes_ = 0;
};

// The `n` values on top of L as one payload (a table { n = n, ... } in the
// codec). False with *error if one cannot persist. Caller holds a HostSection.
// `guard` bounds the payload's size (a too large one fails kTooLarge, in
// *failure when given) and asks the stop check.
bool EncodeValues(lua_State* L, int n, std::string* out, std::string* error, const CodecGuard& guard = {},
                  CodecFailure* failure = nullptr);
// Pushes the message of the error value at `idx` as a string: an error that
// cannot persist (a JS error object) is journaled as its message. Never
// raises (a __tostring that fails gives a fixed text).
void PushErrorMessage(lua_State* L, int idx);
// Pushes the values of a payload; returns how many, or -1 with *error.
// `guard`: decodes under its memory limit and stop check (state_codec.hpp).
// Caller holds a HostSection.
int PushValues(lua_State* L, std::string_view payload, std::string* error, const CodecGuard& guard = {});

}  // namespace lua_tasks
