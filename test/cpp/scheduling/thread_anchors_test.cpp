// SPDX-License-Identifier: MIT
// Tests for ThreadAnchors: anchored values survive full collections, cleared
// ones are collected, slots are reused, and chunks fill past one.
#include "core/scheduling/thread_anchors.hpp"

#include <vector>

#include <gtest/gtest.h>

namespace lua_tasks {
namespace {

class ThreadAnchorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    L = luaL_newstate();
    anchors.Init(L);
    // A weak-valued table sees whether a value is still alive.
    lua_newtable(L);
    lua_newtable(L);
    lua_pushliteral(L, "v");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    watch = luaL_ref(L, LUA_REGISTRYINDEX);
  }
  void TearDown() override {
    anchors = ThreadAnchors();  // frees its registry slot before the state
    lua_close(L);
  }
  // Makes a coroutine, watches it as i, anchors it; returns the slot.
  uint32_t PutThread(int i) {
    lua_newthread(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, watch);
    lua_pushvalue(L, -2);
    lua_rawseti(L, -2, i);
    lua_pop(L, 1);
    return anchors.Put(L);
  }
  bool Alive(int i) {
    lua_gc(L, LUA_GCCOLLECT);
    lua_rawgeti(L, LUA_REGISTRYINDEX, watch);
    const bool alive = lua_rawgeti(L, -1, i) == LUA_TTHREAD;
    lua_pop(L, 2);
    return alive;
  }

  lua_State* L = nullptr;
  ThreadAnchors anchors;
  int watch = LUA_NOREF;
};

TEST_F(ThreadAnchorsTest, KeepsAnchoredValuesAndReleasesCleared) {
  const uint32_t a = PutThread(1);
  const uint32_t b = PutThread(2);
  EXPECT_NE(a, b);
  EXPECT_EQ(lua_gettop(L), 0);  // Put popped each value
  EXPECT_TRUE(Alive(1));
  EXPECT_TRUE(Alive(2));
  anchors.Clear(L, a);
  EXPECT_EQ(lua_gettop(L), 0);
  EXPECT_FALSE(Alive(1));
  EXPECT_TRUE(Alive(2));
  EXPECT_EQ(anchors.size(), 1u);
}

TEST_F(ThreadAnchorsTest, ReusesTheLastFreedSlot) {
  const uint32_t a = PutThread(1);
  PutThread(2);
  anchors.Clear(L, a);
  EXPECT_EQ(PutThread(3), a);
  EXPECT_TRUE(Alive(3));
}

TEST_F(ThreadAnchorsTest, FillsSeveralChunks) {
  const int n = static_cast<int>(ThreadAnchors::kChunk) * 3 + 7;
  std::vector<uint32_t> slots;
  for (int i = 1; i <= n; ++i) slots.push_back(PutThread(i));
  EXPECT_EQ(anchors.size(), static_cast<size_t>(n));
  for (int i = 1; i <= n; i += 2) anchors.Clear(L, slots[i - 1]);  // every odd one
  lua_gc(L, LUA_GCCOLLECT);
  for (int i :
       {1, 2, n - 1, n, static_cast<int>(ThreadAnchors::kChunk) + 1, static_cast<int>(ThreadAnchors::kChunk) + 2}) {
    EXPECT_EQ(Alive(i), i % 2 == 0) << "value " << i;
  }
}

TEST_F(ThreadAnchorsTest, PutsAValueAtTheSlotAskedForWhileItIsFree) {
  lua_newthread(L);
  EXPECT_EQ(anchors.Put(L, 5000), 5000u);
  lua_newthread(L);
  const uint32_t other = anchors.Put(L, 5000);  // taken: a dynamic slot
  EXPECT_GE(other, ThreadAnchors::kDynamicBase);
  EXPECT_EQ(anchors.size(), 2u);
  anchors.Clear(L, 5000);
  EXPECT_EQ(PutThread(1), other + 1);  // a cleared asked-for slot is not a dynamic one
  lua_newthread(L);
  EXPECT_EQ(anchors.Put(L, 5000), 5000u);
  EXPECT_TRUE(Alive(1));
  EXPECT_EQ(anchors.size(), 3u);
}

}  // namespace
}  // namespace lua_tasks
