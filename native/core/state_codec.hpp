// SPDX-License-Identifier: MIT
// State codec: the persistent tasks.state table to bytes and back (DESIGN §8).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <lua.hpp>

namespace lua_tasks {

// Deepest table nesting a snapshot may have (the root table is depth 1). Both
// directions recurse in C once per level, so this also bounds the C stack.
inline constexpr int kMaxStateDepth = 200;
// Largest snapshot written or read, in bytes.
inline constexpr size_t kMaxStateBytes = size_t{1} << 30;

// Encodes the value at `idx` of L into *out (replacing its contents). Returns
// false, with *out empty, and sets *error (lowercase, no trailing period,
// starting with the path from `root_name` in Lua syntax, e.g.
// "state.players[3].onHit: cannot persist a function") for a function,
// coroutine, userdata or light userdata anywhere, nesting past
// kMaxStateDepth, or a snapshot past kMaxStateBytes.
//
// Never raises: it reads with raw accessors only (no metamethods run;
// metatables are not saved) and its one stack call, lua_checkstack, reports
// failure instead of raising. The caller holds a LuaHost::HostSection, so no
// Lua error can longjmp through this C++ frame. Stack unchanged.
bool EncodeState(lua_State* L, int idx, std::string* out, std::string* error, const char* root_name = "state");

// Decodes a snapshot and pushes its value onto L. Returns false (nothing
// pushed) and sets *error for bytes that are not a complete, valid snapshot
// of this format and version. Memory use is bounded by a constant times
// bytes.size(), whatever the bytes claim.
//
// Never raises, provided the caller holds a LuaHost::HostSection: the only
// Lua calls that can fail are allocations (tables, strings), and under a
// HostSection the budgeted allocator does not refuse for the limit.
bool DecodeState(lua_State* L, std::string_view bytes, std::string* error);

}  // namespace lua_tasks
