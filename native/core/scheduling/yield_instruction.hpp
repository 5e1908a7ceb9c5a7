// SPDX-License-Identifier: MIT
// The yield instruction parser: coroutine.yield(instruction, value, unit) into the wait it asks for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <lua.hpp>

#include "core/base/clock.hpp"

namespace lua_tasks {

enum class Unit : uint8_t { kNanoseconds, kMicroseconds, kMilliseconds, kSeconds, kMinutes, kHours, kDays };

// Case-insensitive unit name; false if unknown.
bool ParseUnit(std::string_view name, Unit* unit);
const char* UnitName(Unit unit);
// Nanoseconds in one unit. Inline: every timed wake divides by it.
inline int64_t UnitNs(Unit unit) {
  static constexpr int64_t kNs[] = {
      // static: not built on the stack at each call
      1, 1000, 1000000, 1000000000, int64_t{60} * 1000000000, int64_t{3600} * 1000000000, int64_t{86400} * 1000000000};
  return kNs[static_cast<int>(unit)];
}

enum class WaitKind : uint8_t {
  kNone,          // running, or not started
  kImmediate,     // IMMEDIATE (and a bare yield)
  kFor,           // FOR duration
  kUntilTime,     // UNTIL_TIME epoch time
  kUntilNext,     // UNTIL_NEXT cron
  kIndefinitely,  // INDEFINITELY
  kCommit,        // COMMIT
  kJoin,          // tasks.wait(id)
  kPromise,       // awaiting a JS promise
  kReceive,       // tasks.receive: woken by a message (or its timeout), never by a resume
  kRestore,       // a tasks API call naming a dormant durable task, until a store that reads
                  // asynchronously has it restored (docs/durable.md#restore-at-open)
};
const char* WaitKindName(WaitKind kind);
// Waits a resume by id may end (docs/design.md#yield-instructions).
inline bool IsResumable(WaitKind k) {
  return k == WaitKind::kImmediate || k == WaitKind::kFor || k == WaitKind::kUntilTime || k == WaitKind::kUntilNext ||
         k == WaitKind::kIndefinitely;
}

// A parsed instruction. Trivially destructible: it is filled in by Lua-facing
// C functions that may raise afterwards.
struct WaitRequest {
  WaitKind kind = WaitKind::kImmediate;
  Unit unit = Unit::kSeconds;
  int64_t duration_ns = 0;  // kFor
  int64_t wall_ns = 0;      // kUntilTime
  int cron_index = 0;       // kUntilNext: stack index of the expression (parse time only)
  int zone_index = 0;       // kUntilNext: stack index of the zone, 0 if none
  int64_t join_key = 0;     // kJoin
};

// Longest FOR and furthest UNTIL_TIME accepted: 100 years. Longer waits are
// almost certainly unit mistakes (milliseconds passed as seconds).
inline constexpr int64_t kMaxWaitNs = int64_t{100} * 365 * 24 * 3600 * 1000000000;

// Parses the `n` values at L[first..] as a yield instruction. On failure
// writes a lowercase message naming what was given and what is accepted into
// err (NUL-terminated) and returns false. Never raises.
// The instruction and unit names as interned in one Lua state, by the
// address of the string object (lua_topointer; short strings are unique per
// state and never move, and the owner keeps them referenced):
// ParseYieldInstruction matches a value against those with one API call,
// before it looks at its type or compares any text.
inline constexpr int kKindCount = 6;  // IMMEDIATE, FOR, UNTIL_TIME, UNTIL_NEXT, INDEFINITELY, COMMIT
inline constexpr int kUnitCount = 7;  // in Unit's order
struct YieldNames {
  const void* kinds[kKindCount] = {};
  const void* units[kUnitCount] = {};
};
const char* KindName(int i);  // the i-th instruction name of YieldNames::kinds

// `clock` bounds UNTIL_TIME (read only for that instruction); `names` may be
// null.
bool ParseYieldInstruction(lua_State* L, int first, int n, const Clock& clock, const YieldNames* names,
                           WaitRequest* out, char* err, size_t errlen);

}  // namespace lua_tasks
