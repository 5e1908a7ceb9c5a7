// SPDX-License-Identifier: MIT
// Durable records: the one place a durable task's stored records are written and read.
//
// A record is one byte of kind, then its payload (a yield's fields, or the
// values' bytes below), then the CRC-32C of both, 4 bytes little-endian: a
// damaged record is refused, never replayed. A JS call's or a step's
// payload may start with its identity (what the code called, checked on
// replay: docs/durable.md#changing-code); records written before identities
// existed have none and replay unchecked.
//
// A values payload is either scalars (nil, booleans, numbers, short
// strings: most records, written without the codec's per-call setup) or the
// codec's bytes of a table { n = count, values... }.
//
// Records are stored as keyed writes (docs/design.md#the-store-interface):
// a task's journal in space 2 under "<task id>/<seq, 10 digits>", so its
// records sort in order; its inbox (messages sent and not yet received) in
// space 3 under "<task id>/<seq>" the same way. Record 0 is the start
// record (entry, key, arguments) or, once the task ended and ends are
// retained, the end record (status, key, when, result).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <lua.hpp>

#include "core/codec/state_codec.hpp"
#include "core/scheduling/yield_instruction.hpp"
#include "core/store/store_write.hpp"

namespace lua_tasks {

enum class RecordKind : char {
  kStart = 'A',    // the entry (a global name or mod.fn path), its arguments, the idempotency key
  kYield = 'Y',    // a yield instruction the task waited on (YieldRecord)
  kIn = 'I',       // the values that wait ended with
  kCall = 'C',     // a JS function's outcome: its name, then ok, then its value or error message
  kStep = 'S',     // tasks.step's results, after its name if it has one
  kValue = 'V',    // a clock or random read, or a tasks call on other tasks
  kMessage = 'M',  // a message taken from the mailbox (journal), or one waiting (inbox)
  kEnd = 'E',      // how the task ended (written as the task's records are deleted)
  kPatch = 'P',    // tasks.patched(name) said true: code newer than the task's start
  // A COMMIT that failed: how many COMMITs landed since the record before
  // it, then the values its yield returned (false, error). A COMMIT that
  // landed leaves no record: the records after it, written with or after its
  // batch, show it returned true. Journals written before this kind existed
  // hold a kYield and a kIn for every COMMIT instead.
  kCommitFailed = 'F',
  // A durable task's entry in its runtime's index (space 4): IndexEntry.
  kIndex = 'X',
};
const char* RecordKindName(RecordKind kind);
// A kind's short name, as a history shows it (journal_history.hpp):
// "start", "yield", "in", "call", "step", "value", "message", "end",
// "patch", "commitFailed"; "unknown" for a byte that is no kind.
const char* RecordKindKey(RecordKind kind);

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
inline constexpr int kIndexSpace = 4;  // one entry a task: what Runtime.open reads (IndexEntry)

// ---- Keys ----
// A journal record's or an inbox message's key: "<id>/<seq, 10 digits>".
std::string RecordKey(std::string_view id, size_t seq);
// The seq of a key RecordKey made; false if it has none.
bool RecordSeq(std::string_view key, uint64_t* seq);

// ---- Framing ----
// The longest identity a record keeps (its length is one byte); longer
// JS function names are cut, longer step names refused.
inline constexpr size_t kMaxIdentity = 255;
// A record as stored: kind, identity if any, payload, CRC.
std::string SealRecord(RecordKind kind, std::string_view payload,
                       std::optional<std::string_view> identity = std::nullopt);
// A stored record checked and its CRC taken off; false if it is damaged.
bool UnsealRecord(std::string* record);
// A stored record checked: its kind and payload (a view into *record, which
// loses its CRC). False if it is damaged or empty.
bool OpenRecord(std::string* record, RecordKind* kind, std::string_view* payload);
// The same without a copy: the payload is a view into `record`.
bool OpenRecordView(std::string_view record, RecordKind* kind, std::string_view* payload);
// A record's payload without its identity, which goes to *identity (none
// in a record written without one: an unnamed step, an older version).
std::string_view SplitIdentity(std::string_view payload, std::optional<std::string_view>* identity);
// What a call or step with `identity` is, for a divergence message
// ("a JS call to grant", "tasks.step \"pay\"").
std::string DescribeIdentity(RecordKind kind, std::optional<std::string_view> identity);
// What a record's payload says, for a divergence message.
std::string DescribeRecord(RecordKind kind, std::string_view payload);

// ---- Payloads ----
std::string EncodeYield(const YieldRecord& y);
bool DecodeYield(std::string_view payload, YieldRecord* y);
// A failed COMMIT's payload: `landed`, the COMMITs that landed (and left no
// record) between the record before it and it, then `values` (EncodeValues').
std::string EncodeCommitFailed(uint64_t landed, std::string_view values);
bool DecodeCommitFailed(std::string_view payload, uint64_t* landed, std::string_view* values);

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

// ---- The index (space 4, docs/durable.md#restore-at-open) ----
// A durable task's index entry, key its id: what Runtime.open reads instead
// of its journal to know whether the task must run again now or can stay
// dormant until something needs it. Written with the batch of the task's
// start (running), of each durable wait (waiting: the wait as its yield
// record holds it), and of a wake before that wait's deadline (running
// again); a finished task's entry, while it is retained, is its end record
// (kEnd) instead, and its journal is gone.
struct IndexEntry {
  bool waiting = false;
  YieldRecord wait;                // when waiting
  std::optional<std::string> key;  // its idempotency key
};
// The index's own entry, under a key no task id has: present once every
// unfinished task of the name has an entry (a name written by an older
// version has none until its first open).
inline constexpr char kIndexMarkKey[] = "=index";
// Its payload unless the embedder names the holder that kept it (set_index_mark).
inline constexpr char kIndexMarkDefault[] = "mark";
// An entry sealed as a kIndex record.
std::string SealIndexEntry(const IndexEntry& e);
// A kIndex record's payload read; false if it does not read.
bool DecodeIndexEntry(std::string_view payload, IndexEntry* e);

// ---- The start and end records ----
// A start record's payload: the entry, the key (nil: none) and the `nargs`
// arguments from stack index `first`. Needs room for nargs + 2 values;
// leaves the stack as it was. False with *error (and *failure) if one
// cannot persist. Caller holds a HostSection.
bool EncodeStartRecord(lua_State* L, std::string_view entry, const std::optional<std::string>& key, int first,
                       int nargs, std::string* out, std::string* error, const CodecGuard& guard = {},
                       CodecFailure* failure = nullptr);
// Pushes a start record's arguments and returns how many, with its entry
// and key; -1 with *error if it does not read. Caller holds a HostSection.
// A record written with a label has it, ahead of the values, as a call's
// identity is written (the name rt.spawn gave the task, at most
// kMaxIdentity bytes): *label gets it, or none for a record without one
// (an unnamed task, a record written before labels were kept).
int PushStartRecord(lua_State* L, std::string_view payload, std::string* entry, std::optional<std::string>* key,
                    std::string* error, std::optional<std::string>* label = nullptr);
// An encoded start record's payload given the task's label (see PushStartRecord).
void LabelStartRecord(std::string* payload, std::string_view label);

// How a task ended, as its end record keeps it.
struct EndRecord {
  const char* status = "done";  // "done", "failed" or "cancelled"
  const std::optional<std::string>* key = nullptr;
  int64_t ended_ms = 0;  // wall ms since the epoch
  int result = 0;        // stack index of the result or error (0: none)
  bool error = false;    // `result` is an error: its message is kept
  // Its label, if any: stored after the result, which readers that know
  // only four values never look past.
  const std::optional<std::string>* label = nullptr;
};
// An end record's payload. A result that cannot persist, or is past the
// guard's size, is kept as nil. False only if there is no stack room.
// Leaves the stack as it was. Caller holds a HostSection.
bool EncodeEndRecord(lua_State* L, const EndRecord& end, std::string* out, const CodecGuard& guard = {});

// What a task's first record (a start or an end record) says, pushed:
// a start record gives 3 values (entry, key or nil, label or nil), an end
// record 5 (key or nil, status, ended ms, result or error message, label or
// nil). Returns the count, 0
// for a record of another kind, or -1 with *error if it does not read.
// Caller holds a HostSection.
int PushFirstRecord(lua_State* L, RecordKind kind, std::string_view payload, std::string* error);

}  // namespace lua_tasks
