// SPDX-License-Identifier: MIT
#include "core/scheduling/thread_anchors.hpp"

namespace lua_tasks {

void ThreadAnchors::Init(lua_State* L) {
  lua_newtable(L);
  directory_ = LuaRef::Pop(L);
}

void ThreadAnchors::PushChunk(lua_State* L, uint32_t slot) {
  const lua_Integer index = slot / kChunk + 1;
  directory_.Push(L);
  if (lua_rawgeti(L, -1, index) == LUA_TNIL) {
    lua_pop(L, 1);
    lua_createtable(L, static_cast<int>(kChunk), 0);
    // Making the table may run a collector step, whose finalizers may start
    // tasks: one of them may have made this chunk meanwhile, and replacing
    // it would drop the threads it anchors.
    if (lua_rawgeti(L, -2, index) != LUA_TNIL) {
      lua_remove(L, -2);  // ours
    } else {
      lua_pop(L, 1);
      lua_pushvalue(L, -1);
      lua_rawseti(L, -3, index);
    }
  }
  lua_remove(L, -2);  // the directory
}

uint32_t ThreadAnchors::Put(lua_State* L, uint32_t at) {
  uint32_t slot = kAnySlot;
  if (at < kDynamicBase) {
    PushChunk(L, at);
    const bool taken = lua_rawgeti(L, -1, at % kChunk + 1) != LUA_TNIL;  // never expected
    lua_pop(L, taken ? 2 : 1);
    if (!taken) slot = at;
  }
  if (slot == kAnySlot) {
    if (free_.empty()) {
      slot = next_++;
    } else {
      slot = free_.back();
      free_.pop_back();
    }
    PushChunk(L, slot);
  }
  lua_insert(L, -2);
  lua_rawseti(L, -2, slot % kChunk + 1);
  lua_pop(L, 1);
  ++size_;
  return slot;
}

void ThreadAnchors::Clear(lua_State* L, uint32_t slot) {
  directory_.Push(L);
  lua_rawgeti(L, -1, slot / kChunk + 1);  // exists: slot was handed out
  lua_pushnil(L);
  lua_rawseti(L, -2, slot % kChunk + 1);
  lua_pop(L, 2);
  --size_;
  if (slot >= kDynamicBase) free_.push_back(slot);
}

}  // namespace lua_tasks
