// SPDX-License-Identifier: MIT
// DurableStart: what makes a start durable, handed to Scheduler::Start with the function and its arguments.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <lua.hpp>

namespace lua_tasks {

// A new durable task has `start` and no `records`; a restored one has the
// records of its earlier run, its start record first, and `start` empty.
struct DurableStart {
  // Its id from an earlier run, or a child's id chosen before its start
  // ("" for a new task: it gets an id of this scheduler).
  std::string id;
  std::string start;                 // a new task's start record
  std::vector<std::string> records;  // a restored task's journal, to replay
  std::string entry;                 // its entry's name: a continue-as-new runs it again
  std::optional<std::string> key;    // its idempotency key
  std::optional<std::string> label;  // its name (in its start record already: kept for its end record)
};

// An embedder's start of a durable task (rt.start), L under a HostSection.
//
// A restored task: `records`, its journal as stored (sealed), are unsealed
// and checked, *out takes them, and the arguments its start record holds
// are pushed onto L. Returns their count, or -1 with *error saying which
// record is damaged or does not read.
int RestoreStart(lua_State* L, std::string id, std::vector<std::string> records, DurableStart* out, std::string* error);
// A new task: its start record (`entry`, `key`, the `nargs` values on top of
// L, left there, and `label` ahead of them) into *out. False with *error if
// an argument cannot persist.
bool NewStart(lua_State* L, std::string entry, std::optional<std::string> key, std::optional<std::string> label,
              int nargs, DurableStart* out, std::string* error);

}  // namespace lua_tasks
