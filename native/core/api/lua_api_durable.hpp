// SPDX-License-Identifier: MIT
// The Lua API of durable tasks: tasks.step, tasks.durable, and the clock and random reads they journal.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <lua.hpp>

#include "core/durable/durable_journal.hpp"

namespace lua_tasks {

class Scheduler;

// Installs tasks.step and tasks.durable into the tasks table and wraps
// os.time, os.clock, os.date and math.random so that a durable task's reads
// are journaled. Raises (memory): call in protected mode.
void RegisterDurableApi(lua_State* L, Scheduler* scheduler);

// For Lua-facing C functions (here and the addon's JS calls). Never raise.
//
// Records the `n` values on top of L (left there) as a `kind` record of j,
// with the call's or step's `identity` if it has one. False with a message
// pushed above them if one cannot persist.
bool JournalValues(Scheduler* s, Journal* j, RecordKind kind, lua_State* L, int n,
                   std::optional<std::string_view> identity = std::nullopt);
// j is replaying: pushes the values of its next record, which must be of
// `kind` and, when both it and the code now give one, of the same
// `identity`, and returns how many. -1 with a coded ERR_NONDETERMINISM error
// pushed if the record is another, -2 with a message pushed if it does not
// read.
int ReplayValues(Scheduler* s, Journal* j, RecordKind kind, std::optional<std::string_view> identity, lua_State* L);
// In a replay-only runtime (Scheduler::set_replay_only), j's replay has
// reached its journal's end and the code would now do `now` live: marks the
// task to stop and pushes why. The caller raises it (`return lua_error(L)`)
// with nothing of its own alive.
void PushReplayStop(Scheduler* s, Journal* j, lua_State* L, const std::string& now);
// Calls `f` (a C function of the tasks API) for the running durable task:
// live, its results are journaled; in a replay, the recorded ones are
// returned and `f` is not called. Raises as f does.
int JournaledCall(lua_State* L, Scheduler* s, lua_CFunction f);

}  // namespace lua_tasks
