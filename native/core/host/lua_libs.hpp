// SPDX-License-Identifier: MIT
// Library profiles: which standard libraries a runtime's Lua code can reach.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <lua.hpp>

namespace lua_tasks {

// 'safe' (default), 'all', or an explicit list of library names.
struct LibProfile {
  enum class Kind { kSafe, kAll, kList };
  Kind kind = Kind::kSafe;
  std::vector<std::string> names;  // for kList
};

// The names a list may contain, for messages and validation.
inline constexpr std::string_view kLibNames[] = {"base", "coroutine", "string", "table", "math",
                                                 "utf8", "os",        "io",     "debug", "package"};

// True if `name` is one of kLibNames.
bool IsLibName(std::string_view name);

// Opens the profile's libraries into L's globals. Raises Lua errors (memory):
// call it in protected mode. Stack: unchanged.
void OpenLibs(lua_State* L, const LibProfile& profile);

}  // namespace lua_tasks
