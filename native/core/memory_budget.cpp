// SPDX-License-Identifier: MIT
// MemoryBudget: the Lua allocator of a runtime, with a byte limit and a peak.
#include "memory_budget.hpp"

#include <cstdlib>

namespace lua_tasks {

void* MemoryBudget::Alloc(void* ud, void* ptr, size_t osize, size_t nsize) noexcept {
  auto* b = static_cast<MemoryBudget*>(ud);
  // For a new block Lua passes the object's type in osize, not a size.
  const size_t old = ptr ? osize : 0;
  if (nsize == 0) {
    std::free(ptr);
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
  void* p = ptr == nullptr ? std::malloc(nsize) : std::realloc(ptr, nsize);
  if (p == nullptr) return nullptr;
  b->used = b->used - old + nsize;
  if (b->used > b->peak) b->peak = b->used;
  return p;
}

}  // namespace lua_tasks
