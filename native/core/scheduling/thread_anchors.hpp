// SPDX-License-Identifier: MIT
// ThreadAnchors: keeps task coroutines reachable for Lua's collector.
#pragma once

#include <cstdint>

#include <lua.hpp>

#include "core/base/grow_array.hpp"
#include "core/host/lua_ref.hpp"

namespace lua_tasks {

// A registry reference per task (luaL_ref) puts a million threads in one
// array: the collector marks that array in a single step (tens of ms at a
// million), and its doubling allocates 16 MB at once, which Lua repays as one
// burst of collector work. Here the values sit in tables of kChunk slots
// under one directory table, so every piece the collector sees stays small
// and nothing grows by more than one chunk at a time.
//
// A coroutine in the ThreadArena is anchored at its arena slot, so that the
// collector, walking the chunks in order, meets coroutines in memory order.
// That slot is free whenever the arena hands it out: a coroutine's memory is
// only freed once nothing (its anchor included) holds it. Any other value
// gets a slot from kDynamicBase up, reused last freed first.
class ThreadAnchors {
 public:
  static constexpr uint32_t kChunk = 1024;
  static constexpr uint32_t kAnySlot = UINT32_MAX;
  static constexpr uint32_t kDynamicBase = uint32_t{1} << 31;

  // Makes the directory table. Raises (memory): call in protected mode.
  void Init(lua_State* L);

  // Pops the value on top of L into slot `at` if given and free, else into
  // a free slot from kDynamicBase up; returns the slot. May allocate a
  // chunk: call with the memory limit not enforced (host code).
  uint32_t Put(lua_State* L, uint32_t at = kAnySlot);
  // Clears a slot (the value becomes collectable) and frees it. Raises no
  // Lua error (no allocation on the Lua side).
  void Clear(lua_State* L, uint32_t slot);

  size_t size() const { return size_; }

 private:
  void PushChunk(lua_State* L, uint32_t slot);  // pushes the chunk holding slot, creating it if new

  LuaRef directory_;              // { [1 + slot / kChunk] = chunk }
  GrowArray<uint32_t> free_;      // grows to a slot per task as a burst ends: no copying doublings
  uint32_t next_ = kDynamicBase;  // dynamic slots below this have been handed out
  size_t size_ = 0;               // slots holding a value
};

}  // namespace lua_tasks
