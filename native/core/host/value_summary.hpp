// SPDX-License-Identifier: MIT
// Value summaries: a Lua value as a short line for a person, never a dump of it.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <lua.hpp>

namespace lua_tasks {

// The bound of one value's summary, and of a list's in all.
inline constexpr size_t kSummaryBytes = 120;
inline constexpr size_t kSummaryListBytes = 1024;

// The value at `idx` in at most about `max` bytes: nil, booleans and
// numbers as Lua prints them; a string quoted and cut, with its length
// ("\"abc...\" (5000 bytes)"); a table by its first entries, one level
// deep, and its size ("{1, 2, 3, ... (100 items)}", "{gold = 5, ... (12
// keys)}"); anything else its type name. Raw access only (no metamethod
// runs) and nothing allocated in L: never raises. Needs 2 free stack slots
// (without them a table is just "table").
std::string SummarizeValue(lua_State* L, int idx, size_t max = kSummaryBytes);

// The `n` values from `first` summarised, in at most about
// kSummaryListBytes in all: the values past it are one last entry
// ("... (7 more)").
std::vector<std::string> SummarizeValues(lua_State* L, int first, int n);

}  // namespace lua_tasks
