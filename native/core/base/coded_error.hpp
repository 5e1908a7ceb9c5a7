// SPDX-License-Identifier: MIT
// CodedError: a Lua error value that carries its code (docs/design.md#errors).
//
// The runtime's own Lua API raises one where a failure has a documented code
// of its own (a bad yield instruction, a COMMIT that cannot be made), so the
// embedder classifies a task's failure by the value it died of, never by the
// text of a message. In Lua it reads like the string it replaces:
// tostring(e) and e.message give the message (with the caller's position,
// as luaL_error's), e.code the code's name, and `..` concatenates the text.
// Nothing else of it is reachable, and Lua code cannot make one.
#pragma once

#include <cstdint>
#include <string_view>

#include <lua.hpp>

namespace lua_tasks {

enum class ErrorCode : uint8_t {
  kBadYield,        // ERR_BAD_YIELD: a bad yield instruction, unit, duration, time or cron string
  kCommitFailed,    // ERR_COMMIT_FAILED: a COMMIT that cannot be made (no store)
  kNondeterminism,  // ERR_NONDETERMINISM: a durable task's replay met code that did something else
  kStoreLimit,      // ERR_STORE_LIMIT: a write or journal record past a persistence limit (persist_limits.hpp)
};
const char* ErrorCodeName(ErrorCode code);

// Creates the metatable in L's registry. Raises (memory): call in protected
// mode, once per state.
void RegisterCodedError(lua_State* L);

// Raises an error value with `code` whose message is `message` prefixed with
// the position of the Lua code that called the running C function (as
// luaL_error). Use as `return RaiseCodedError(...)` from a C function.
int RaiseCodedError(lua_State* L, ErrorCode code, const char* message);

// Pushes an error value with `code` and `message` as it is (no position):
// for an error the scheduler gives a task from outside its code.
void PushCodedError(lua_State* L, ErrorCode code, const char* message);

// If the value at `idx` is a coded error, sets *code and returns true. Never
// raises; uses two stack slots (false if L has no room for them).
bool IsCodedError(lua_State* L, int idx, ErrorCode* code);

// The message of the coded error at `idx` (IsCodedError said true). Valid
// while that value lives. Never raises.
std::string_view CodedErrorMessage(lua_State* L, int idx);

}  // namespace lua_tasks
