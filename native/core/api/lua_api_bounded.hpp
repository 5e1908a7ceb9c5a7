// SPDX-License-Identifier: MIT
// Bounded library functions: the standard ones Lua could make run for seconds, rewritten to stop when told.
#pragma once

#include <cstddef>

#include <lua.hpp>

namespace lua_tasks {

// Replaces, in every library that is open, the functions whose one call can
// take time without bound (or bounded only by memory) with versions that
// behave the same but meter their work (WorkMeter) and stop when
// LuaHost::StopDue says so:
//   base     load (fed to the parser a piece at a time), tonumber,
//            collectgarbage (charged: a full collection cannot be cut)
//   string   rep, lower, upper, reverse, format, pack, packsize, unpack
//   table    concat, insert, remove, move, sort, unpack
//   utf8     len, offset
//   os       date
// and os.time and os.date read "now" from the host's Clock (LuaHost::clock),
// the clock the scheduler wakes wall-clock waits by, when it has one.
// The audit of every function 'safe' opens, and why the others stay, is in
// docs/security.md ("Long C functions"). Raises (memory): call in protected mode.
void InstallBoundedFunctions(lua_State* L);

// lua_load of a text (or, if mode allows, binary) chunk held in memory, fed
// to the parser in pieces; `metered`: with a stop check between them (Lua's
// load). The embedder's own sources (rt.load, preloaded modules) are parsed
// unmetered: a taskTimeout of a millisecond must not fail a runtime's
// creation for the time util.async takes to parse. Returns a Lua status, as
// luaL_loadbufferx does.
int LoadText(lua_State* L, const char* s, size_t len, const char* chunkname, const char* mode, bool metered);

// Registered into the string and table libraries by InstallBoundedFunctions.
void RegisterBoundedString(lua_State* L, int table);
void RegisterBoundedTable(lua_State* L, int table);

}  // namespace lua_tasks
