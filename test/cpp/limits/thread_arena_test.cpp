// SPDX-License-Identifier: MIT
// Tests for ThreadArena, alone and as the home of a Lua state's coroutines
// (through MemoryBudget): placement, lowest-first reuse, both parts freed
// before a slot, a grown stack leaving, empty slabs unmapped.
#include "core/limits/thread_arena.hpp"

#include <vector>

#include <gtest/gtest.h>
#include <lua.hpp>

#include "core/limits/memory_budget.hpp"

namespace lua_tasks {
namespace {

constexpr size_t kState = 208;  // sizeof(lua_State) + LUA_EXTRASPACE in Lua 5.4 on 64-bit
constexpr size_t kStack = ThreadArena::kStackBytes;

char* NewCoroutine(ThreadArena& arena) {
  auto* state = static_cast<char*>(arena.NewState(kState));
  EXPECT_NE(state, nullptr);
  EXPECT_EQ(arena.NewStack(kStack), state + kState);  // right after, 208 being a multiple of 16
  return state;
}

TEST(ThreadArenaTest, PutsAStackRightAfterItsStateAndKnowsBoth) {
  ThreadArena arena;
  char* a = NewCoroutine(arena);
  EXPECT_TRUE(arena.Owns(a, kState));
  EXPECT_TRUE(arena.Owns(a + kState, kStack));
  EXPECT_FALSE(arena.Owns(a, kStack));  // the sizes Lua gives must match the parts
  EXPECT_EQ(arena.SlotOf(a + 8), 0u);   // lua_State sits after the extra space
  EXPECT_EQ(arena.SlotOf(NewCoroutine(arena) + 8), 1u);
  EXPECT_EQ(arena.live_slots(), 2u);
  EXPECT_EQ(arena.mapped_slabs(), 1u);
}

TEST(ThreadArenaTest, PlacesAStackOnlyRightAfterItsStateAndOnlyOfTheKnownSize) {
  ThreadArena arena;
  ASSERT_NE(arena.NewState(kState), nullptr);
  arena.Forget();  // another allocation came between
  EXPECT_EQ(arena.NewStack(kStack), nullptr);
  ASSERT_NE(arena.NewState(kState), nullptr);
  EXPECT_EQ(arena.NewStack(kStack + 16), nullptr);
  EXPECT_EQ(arena.NewStack(kStack), nullptr);  // the chance has passed
}

TEST(ThreadArenaTest, LeavesOtherSizesAndForeignBlocksAlone) {
  ThreadArena arena;
  EXPECT_EQ(arena.NewState(ThreadArena::kMaxStateBytes + 1), nullptr);  // a main state
  NewCoroutine(arena);
  EXPECT_EQ(arena.NewState(kState + 16), nullptr);  // the layout is fixed by the first
  std::vector<char> heap(kState);
  EXPECT_FALSE(arena.Free(heap.data(), kState));
  EXPECT_EQ(arena.SlotOf(heap.data()), ThreadArena::kNoSlot);
}

TEST(ThreadArenaTest, FreesASlotOnceBothPartsAreFreeAndReusesTheLowest) {
  ThreadArena arena;
  char* a = NewCoroutine(arena);
  char* b = NewCoroutine(arena);
  NewCoroutine(arena);
  ASSERT_TRUE(arena.Free(b + kState, kStack));  // its stack grew: moved to the heap
  EXPECT_EQ(arena.live_slots(), 3u);
  EXPECT_EQ(arena.SlotOf(b + 8), 1u);
  ASSERT_TRUE(arena.Free(a, kState));
  EXPECT_EQ(arena.live_slots(), 3u);  // a's stack is still there
  EXPECT_EQ(arena.SlotOf(a + 8), ThreadArena::kNoSlot);
  ASSERT_TRUE(arena.Free(b, kState));
  EXPECT_EQ(arena.live_slots(), 2u);
  EXPECT_FALSE(arena.Free(b, kState));  // freed already
  EXPECT_EQ(NewCoroutine(arena), b);    // slot 1: a's slot 0 still holds its stack
  ASSERT_TRUE(arena.Free(a + kState, kStack));
  EXPECT_EQ(NewCoroutine(arena), a);
}

TEST(ThreadArenaTest, UnmapsEmptySlabsButKeepsOne) {
  ThreadArena arena;
  std::vector<char*> all;
  for (uint32_t i = 0; i < 3 * ThreadArena::kSlabSlots + 1; ++i) all.push_back(NewCoroutine(arena));
  EXPECT_EQ(arena.mapped_slabs(), 4u);
  EXPECT_EQ(arena.SlotOf(all.back() + 8), 3 * ThreadArena::kSlabSlots);
  for (char* p : all) {
    ASSERT_TRUE(arena.Free(p, kState));
    ASSERT_TRUE(arena.Free(p + kState, kStack));
  }
  EXPECT_EQ(arena.live_slots(), 0u);
  EXPECT_EQ(arena.mapped_slabs(), 1u);
  EXPECT_EQ(arena.SlotOf(NewCoroutine(arena) + 8), 0u);  // slab 0 emptied first: it is the one kept
  EXPECT_EQ(arena.maps(), 4u);
}

// Lua frees coroutines newest first, so the highest slab empties first and
// is the one kept. A new coroutine goes there rather than mapping the lower,
// unmapped slab 0 again: that mapped and unmapped a slab at every
// collection, and spawning cost 6.5 times as much.
TEST(ThreadArenaTest, ReusesTheKeptSlabRatherThanMappingALowerOne) {
  ThreadArena arena;
  std::vector<char*> all;
  for (uint32_t i = 0; i < ThreadArena::kSlabSlots + 6; ++i) all.push_back(NewCoroutine(arena));
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    ASSERT_TRUE(arena.Free(*it + kState, kStack));
    ASSERT_TRUE(arena.Free(*it, kState));
  }
  EXPECT_EQ(arena.mapped_slabs(), 1u);
  for (int i = 0; i < 5000; ++i) {
    char* c = NewCoroutine(arena);
    EXPECT_EQ(arena.SlotOf(c + 8), ThreadArena::kSlabSlots);  // slot 0 of slab 1, the one kept
    ASSERT_TRUE(arena.Free(c + kState, kStack));
    ASSERT_TRUE(arena.Free(c, kState));
  }
  EXPECT_EQ(arena.maps(), 2u);
  // Past the kept slab's room, the unmapped slab 0 is mapped again.
  for (uint32_t i = 0; i < ThreadArena::kSlabSlots + 1; ++i) NewCoroutine(arena);
  EXPECT_EQ(arena.mapped_slabs(), 2u);
  EXPECT_EQ(arena.maps(), 3u);
}

// Slabs filled and emptied once go back at once; a workload that comes back
// for them (10,000 tasks a run) keeps as many as it reused, up to the cap,
// and stops mapping them.
TEST(ThreadArenaTest, KeepsTheEmptySlabsAWorkloadComesBackFor) {
  ThreadArena arena;
  auto fill_and_empty = [&](uint32_t slabs) {
    std::vector<char*> all;
    for (uint32_t i = 0; i < slabs * ThreadArena::kSlabSlots; ++i) all.push_back(NewCoroutine(arena));
    for (char* p : all) {
      ASSERT_TRUE(arena.Free(p, kState));
      ASSERT_TRUE(arena.Free(p + kState, kStack));
    }
  };
  fill_and_empty(4);
  EXPECT_EQ(arena.mapped_slabs(), 1u);
  EXPECT_EQ(arena.maps(), 4u);
  fill_and_empty(4);  // maps the three unmapped again
  EXPECT_EQ(arena.reserve(), 4u);
  EXPECT_EQ(arena.mapped_slabs(), 4u);
  EXPECT_EQ(arena.maps(), 7u);
  fill_and_empty(4);
  EXPECT_EQ(arena.maps(), 7u);
  for (int i = 0; i < 3; ++i) fill_and_empty(20);
  EXPECT_EQ(arena.reserve(), 16u);
  EXPECT_EQ(arena.mapped_slabs(), 16u);
}

// Lua's own coroutines through MemoryBudget: each lands in a slot, a deep
// recursion grows (and so moves) a stack, and collecting them empties the
// arena and returns every byte.
TEST(ThreadArenaTest, HoldsALuaStatesCoroutinesUntilCollected) {
  MemoryBudget budget;
  lua_State* L = lua_newstate(MemoryBudget::Alloc, &budget);
  ASSERT_NE(L, nullptr);
  luaL_openlibs(L);
  const size_t base = budget.used;
  const char* src = R"(
    local function deep(n) if n == 0 then return coroutine.yield(1) end return deep(n - 1) + 1 end
    cos = {}
    for i = 1, 3000 do
      local co = coroutine.create(function(n) return deep(n) end)
      assert(coroutine.resume(co, i % 100 == 0 and 500 or 0))
      cos[i] = co
    end
    for i = 1, 3000, 2 do assert(coroutine.resume(cos[i], 0)) end
  )";
  ASSERT_EQ(luaL_dostring(L, src), LUA_OK) << lua_tostring(L, -1);
  const ThreadArena& arena = budget.arena();
  EXPECT_GE(arena.live_slots(), 3000u);
  EXPECT_GE(arena.mapped_slabs(), 3u);
  lua_getglobal(L, "cos");
  lua_rawgeti(L, -1, 1234);
  EXPECT_NE(arena.SlotOf(lua_tothread(L, -1)), ThreadArena::kNoSlot);
  lua_rawgeti(L, -2, 1000);  // grown for 500 calls: its state stays in its slot
  EXPECT_NE(arena.SlotOf(lua_tothread(L, -1)), ThreadArena::kNoSlot);
  lua_pop(L, 3);
  ASSERT_EQ(luaL_dostring(L, "cos = nil"), LUA_OK);
  lua_gc(L, LUA_GCCOLLECT);
  lua_gc(L, LUA_GCCOLLECT);
  EXPECT_EQ(arena.live_slots(), 0u);
  EXPECT_EQ(arena.mapped_slabs(), 1u);
  EXPECT_LE(budget.used, base + 4096);  // the global table holds nothing much more than before
  lua_close(L);
}

}  // namespace
}  // namespace lua_tasks
