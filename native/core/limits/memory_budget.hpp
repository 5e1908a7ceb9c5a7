// SPDX-License-Identifier: MIT
// MemoryBudget: the Lua allocator of a runtime, with a byte limit and a peak.
#pragma once

#include <cstddef>
#include <unordered_map>

#include "core/limits/thread_arena.hpp"

namespace lua_tasks {

// Accounts every byte a lua_State holds. While `enforce` is set (Lua code is
// running), an allocation that would pass `limit` fails, which Lua turns into
// a memory error that pcall can report. While the host's own C++ code pushes
// values (enforce off) allocations never fail for the limit: the host calls
// Lua API functions outside protected mode, where a memory error would longjmp
// over C++ destructors. The overshoot is bounded by the values the host pushes.
//
// With mimalloc (LUA_TASKS_HAVE_MIMALLOC) the blocks come from a heap of the
// runtime's own: a runtime's coroutines and tables sit together instead of
// among every other runtime's and Node's blocks, which kept W2 steady beside
// other runtimes (see docs/performance.md). The heap belongs to the thread
// that made the budget, as the runtime does.
//
// Coroutines (their state and first stack) go to a ThreadArena instead; see
// there why.
struct MemoryBudget {
  MemoryBudget();
  ~MemoryBudget();
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  size_t used = 0;
  size_t peak = 0;
  size_t limit = 0;         // 0 = no limit
  bool enforce = false;     // set while Lua code runs
  bool refused = false;     // an allocation failed for the limit since last reset
  size_t refused_size = 0;  // the size of that allocation
  size_t refused_used = 0;  // and the memory in use then (unwinding frees some)

  // Bytes in live strings of kBigString bytes or more: comparing or hashing
  // one is a single VM instruction as long as the string (CpuBudget::Cap).
  static constexpr size_t kBigString = size_t{256} << 10;
  size_t big_strings = 0;
  // Called while Lua code runs (enforce set) when a block of kBigString
  // bytes or more is made or grown, and when an allocation is refused: work
  // the CPU budget's instruction count does not see (a copy that long, or
  // the full collection Lua runs before it gives up on an allocation). Must
  // not raise, allocate from this budget, or touch the Lua stack.
  void (*on_large)(void* ctx) = nullptr;
  void* on_large_ctx = nullptr;

  // lua_Alloc; `ud` is the MemoryBudget.
  static void* Alloc(void* ud, void* ptr, size_t osize, size_t nsize) noexcept;

  const ThreadArena& arena() const { return arena_; }

 private:
  void* HeapMalloc(size_t n) noexcept;
  void* HeapRealloc(void* p, size_t n) noexcept;
  void HeapFree(void* p) noexcept;

  void NoteLarge(void* p, size_t osize, size_t nsize, bool string) noexcept;

  ThreadArena arena_;
  void* heap_ = nullptr;  // mi_heap_t*, when built with mimalloc
  // The big strings' blocks and sizes: a freed block of that size may be
  // anything, and only strings count (a table's array of 16 MB is no risk).
  std::unordered_map<void*, size_t> big_string_blocks_;
};

}  // namespace lua_tasks
