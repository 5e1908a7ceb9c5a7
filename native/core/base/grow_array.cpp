// SPDX-License-Identifier: MIT
// GrowArray's mapping calls.
#include "core/base/grow_array.hpp"

#include <sys/mman.h>

namespace lua_tasks {

void* MapBytes(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

void* RemapBytes(void* p, size_t old_bytes, size_t bytes) {
#ifdef __linux__
  void* q = mremap(p, old_bytes, bytes, MREMAP_MAYMOVE);
  return q == MAP_FAILED ? nullptr : q;
#else
  (void)p;
  (void)old_bytes;
  (void)bytes;
  return nullptr;  // never called: kCanRemap is false
#endif
}

void UnmapBytes(void* p, size_t bytes) {
  munmap(p, bytes);
}

}  // namespace lua_tasks
