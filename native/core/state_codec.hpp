// SPDX-License-Identifier: MIT
// State codec: the persistent tasks.state table to bytes and back (DESIGN §8).
#pragma once

#include <string>
#include <string_view>

#include <lua.hpp>

namespace lua_tasks {

// Deepest table nesting a snapshot may have.
inline constexpr int kMaxStateDepth = 200;
// Largest snapshot written or read.
inline constexpr size_t kMaxStateBytes = size_t{1} << 30;

// Encodes the value at `idx` of L into *out. Returns false and sets *error
// (lowercase, no trailing period, naming the path from `root`) for a value
// that cannot persist. Never raises: it reads with raw, non-allocating API
// calls only, and the caller holds a LuaHost::HostSection. Stack unchanged.
bool EncodeState(lua_State* L, int idx, std::string* out, std::string* error, const char* root = "state");

// Decodes a snapshot and pushes its value onto L. Returns false (nothing
// pushed) and sets *error for bytes that are not a complete snapshot of this
// format. Never raises (same conditions as EncodeState).
bool DecodeState(lua_State* L, std::string_view bytes, std::string* error);

}  // namespace lua_tasks
