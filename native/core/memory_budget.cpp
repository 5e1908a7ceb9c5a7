// SPDX-License-Identifier: MIT
// MemoryBudget: the Lua allocator of a runtime, with a byte limit and a peak.
#include "memory_budget.hpp"

#include <cstdlib>

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

void* MemoryBudget::Alloc(void* ud, void* ptr, size_t osize, size_t nsize) noexcept {
  auto* b = static_cast<MemoryBudget*>(ud);
  // For a new block Lua passes the object's type in osize, not a size.
  const size_t old = ptr ? osize : 0;
  if (nsize == 0) {
#if LUA_TASKS_HAVE_MIMALLOC
    mi_free(ptr);
#else
    std::free(ptr);
#endif
    b->used -= old;
    return nullptr;
  }
  if (nsize > old && b->enforce && b->limit != 0 && b->used - old + nsize > b->limit) {
    b->refused = true;
    b->refused_size = nsize;
    return nullptr;
  }
  // malloc for a new block: realloc(nullptr) gets there too, after more checks,
  // and decoding a large state makes hundreds of thousands of new blocks.
#if LUA_TASKS_HAVE_MIMALLOC
  auto* heap = static_cast<mi_heap_t*>(b->heap_);
  void* p = heap == nullptr  ? nullptr
            : ptr == nullptr ? mi_heap_malloc(heap, nsize)
                             : mi_heap_realloc(heap, ptr, nsize);
#else
  void* p = ptr == nullptr ? std::malloc(nsize) : std::realloc(ptr, nsize);
#endif
  if (p == nullptr) return nullptr;
  b->used = b->used - old + nsize;
  if (b->used > b->peak) b->peak = b->used;
  return p;
}

}  // namespace lua_tasks
