// SPDX-License-Identifier: MIT
// MemoryBudget: the Lua allocator of a runtime, with a byte limit and a peak.
#include "core/limits/memory_budget.hpp"

#include <cstdlib>
#include <cstring>

#include <lua.hpp>

#if LUA_TASKS_HAVE_MIMALLOC
#include <mimalloc.h>
#endif

namespace lua_tasks {

#if LUA_TASKS_HAVE_MIMALLOC
MemoryBudget::MemoryBudget() : heap_(mi_heap_new()) {}
// Every block is freed by then (lua_close); any left would move to the
// thread's default heap rather than be lost.
MemoryBudget::~MemoryBudget() {
  if (heap_ == nullptr) return;
  mi_heap_delete(static_cast<mi_heap_t*>(heap_));
  // mimalloc keeps freed pages committed for reuse; a closed runtime's
  // memory goes back to the system now, as it did with malloc.
  mi_collect(true);
}
#else
MemoryBudget::MemoryBudget() = default;
MemoryBudget::~MemoryBudget() = default;
#endif

#if LUA_TASKS_HAVE_MIMALLOC
void* MemoryBudget::HeapMalloc(size_t n) noexcept {
  auto* heap = static_cast<mi_heap_t*>(heap_);
  return heap == nullptr ? nullptr : mi_heap_malloc(heap, n);
}
void* MemoryBudget::HeapRealloc(void* p, size_t n) noexcept {
  auto* heap = static_cast<mi_heap_t*>(heap_);
  return heap == nullptr ? nullptr : mi_heap_realloc(heap, p, n);
}
void MemoryBudget::HeapFree(void* p) noexcept {
  mi_free(p);
}
#else
void* MemoryBudget::HeapMalloc(size_t n) noexcept {
  return std::malloc(n);
}
void* MemoryBudget::HeapRealloc(void* p, size_t n) noexcept {
  return std::realloc(p, n);
}
void MemoryBudget::HeapFree(void* p) noexcept {
  std::free(p);
}
#endif

void* MemoryBudget::Alloc(void* ud, void* ptr, size_t osize, size_t nsize) noexcept {
  auto* b = static_cast<MemoryBudget*>(ud);
  ThreadArena& arena = b->arena_;
  // For a new block Lua passes the object's type in osize, not a size.
  const size_t old = ptr ? osize : 0;
  if (nsize == 0) {
    arena.Forget();
    if (old >= kBigString) b->NoteLarge(ptr, old, 0, false);
    if (!arena.Free(ptr, osize)) b->HeapFree(ptr);
    b->used -= old;
    return nullptr;
  }
  if (nsize > old && b->enforce && b->limit != 0 && b->used - old + nsize > b->limit) {
    arena.Forget();
    b->refused = true;
    b->refused_size = nsize;
    b->refused_used = b->used;
    if (b->on_large != nullptr) b->on_large(b->on_large_ctx);  // Lua collects all before it gives up
    return nullptr;
  }
  void* p;
  if (ptr == nullptr) {
    // malloc for a new block: realloc(nullptr) gets there too, after more
    // checks, and decoding a large state makes hundreds of thousands of them.
    p = osize == LUA_TTHREAD ? arena.NewState(nsize) : arena.NewStack(nsize);
    if (p == nullptr) p = b->HeapMalloc(nsize);
  } else {
    arena.Forget();
    if (arena.Owns(ptr, osize)) {
      // A coroutine's stack that Lua resizes leaves the arena for good.
      p = b->HeapMalloc(nsize);
      if (p != nullptr) {
        std::memcpy(p, ptr, osize < nsize ? osize : nsize);
        arena.Free(ptr, osize);
      }
    } else {
      p = b->HeapRealloc(ptr, nsize);
    }
  }
  if (p == nullptr) return nullptr;
  if (old >= kBigString) b->NoteLarge(ptr, old, 0, false);  // resized: strings never are, but look
  if (nsize >= kBigString && nsize > old) b->NoteLarge(p, 0, nsize, ptr == nullptr && osize == LUA_TSTRING);
  b->used = b->used - old + nsize;
  if (b->used > b->peak) b->peak = b->used;
  return p;
}

void MemoryBudget::NoteLarge(void* p, size_t osize, size_t nsize, bool string) noexcept {
  if (nsize == 0) {  // p (osize bytes) goes away, or moves
    if (p == nullptr || big_string_blocks_.empty()) return;
    auto it = big_string_blocks_.find(p);
    if (it == big_string_blocks_.end()) return;
    big_strings -= it->second;
    big_string_blocks_.erase(it);
    return;
  }
  if (string) {
    try {
      big_string_blocks_.emplace(p, nsize);
      big_strings += nsize;
    } catch (...) {
      // Not counted (no memory for the entry): the cap is only looser.
    }
  }
  if (enforce && on_large != nullptr) on_large(on_large_ctx);
}

}  // namespace lua_tasks
