// SPDX-License-Identifier: MIT
// The Lua API of durable tasks: tasks.step, tasks.durable, and the clock and random reads and JS calls they journal.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <lua.hpp>

#include "core/codec/state_codec.hpp"
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
// In a replay-only runtime (Replayer::set_replay_only), j's replay has
// reached its journal's end and the code would now do `now` live: marks the
// task to stop and pushes why. The caller raises it (`return lua_error(L)`)
// with nothing of its own alive.
void PushReplayStop(Scheduler* s, Journal* j, lua_State* L, const std::string& now);
// A call of an embedder's function (a JS function) from the running durable
// task j, known by `name` (checked on replay when both sides have one).
// Before the call: -2 (kCallLive) if the embedder calls it; else L is
// emptied and the recorded outcome's values pushed, their count returned, or
// -1 with the error to raise on top (the call's recorded failure, a
// divergence, a replay-only runtime's stop). The caller raises it
// (`return lua_error(L)`) with nothing of its own alive.
constexpr int kCallLive = -2;
int ReplayCall(Scheduler* s, Journal* j, std::optional<std::string_view> name, lua_State* L);
// After a live call: records its outcome, (true, its values) or (false, the
// error's message: an error object is journaled as its message). `n`: its
// values on top, or -1 with the error on top. Returns n, or -1 with an error
// on top.
int JournalCall(Scheduler* s, Journal* j, lua_State* L, int n, std::optional<std::string_view> name);
// The call returned a promise that the task now awaits: its outcome is
// recorded under `name` when it settles (without memory for the name, the
// record goes without one: unchecked on replay).
void AwaitCall(Journal* j, std::string_view name) noexcept;
// Calls `f` (a C function of the tasks API) for the running durable task:
// live, its results are journaled; in a replay, the recorded ones are
// returned and `f` is not called. Raises as f does.
int JournaledCall(lua_State* L, Scheduler* s, lua_CFunction f);

// The running durable task's journal, unless none runs or a step of it is
// running (then what the step does is not journaled on its own).
Journal* RunningJournal(Scheduler* s);
// Pushes the function a durable task's entry names: a global, else a
// module's (required if need be). Raises if there is none.
void PushEntry(lua_State* L, const char* entry, const char* who);
// Pushes why a start record's arguments did not encode: past maxValueBytes
// (an ERR_STORE_LIMIT value), or a value that cannot persist.
void PushStartError(lua_State* L, Scheduler* s, const char* who, const std::string& error, CodecFailure failure);

// tasks.start from a durable task, and tasks.start_durable (lua_api_children.cpp):
// starts a durable task from the entry at index 1 (a name, or for
// tasks.start a function that a global or a loaded module's field holds)
// and the arguments above it; returns its id. From a live durable task,
// the id is journaled before the task's start record, in the same write; a
// replay returns the recorded id and starts nothing (docs/durable.md#children).
int StartChild(lua_State* L, Scheduler* s, const char* who);

}  // namespace lua_tasks
