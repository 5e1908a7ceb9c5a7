// SPDX-License-Identifier: MIT
// Journal history: a durable task's stored records read one by one for a person (rt.inspect, lua-tasks inspect).
//
// The records' format is durable_record.hpp's; this only says what each
// record means, through its decoders. Every value is summarised
// (value_summary.hpp): a history shows what entered a task, never a dump of
// what it holds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <lua.hpp>

#include "core/codec/state_codec.hpp"
#include "core/durable/durable_record.hpp"

namespace lua_tasks {

struct HistoryRecord {
  uint64_t seq = 0;  // its place in the journal (its key's number)
  bool ok = false;   // it reads; else `error` says why
  std::string error;
  RecordKind kind = RecordKind::kStart;
  std::string what;                  // DescribeRecord's words: "a yield (FOR)", "tasks.step \"pay\""
  std::optional<std::string> name;   // start: its entry; call, step: the identity; patch: the patch's name
  std::optional<std::string> key;    // start, end, index: the idempotency key
  std::optional<std::string> label;  // start, end: the task's label (the name rt.spawn gave it)
  bool has_yield = false;            // kYield: `yield` holds the wait
  YieldRecord yield;
  std::string status;               // kEnd: "done", "failed" or "cancelled"; kIndex: "running" or "waiting"
  int64_t ended_ms = 0;             // kEnd: wall ms
  uint64_t landed = 0;              // kCommitFailed: COMMITs that landed before it
  std::vector<std::string> values;  // summaries: a start's arguments, an outcome's values, a call's (ok, value)
};

// One stored record of a journal: its key ("<task id>/<seq>") and its bytes
// as the store keeps them (sealed). Values are decoded onto L under `guard`
// (its memory bound: a value past it is told as an error) and popped again.
// Caller holds a HostSection on L. Leaves L's stack as it was.
HistoryRecord ReadHistoryRecord(lua_State* L, std::string_view key, std::string record, const CodecGuard& guard);

}  // namespace lua_tasks
