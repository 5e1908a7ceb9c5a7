// SPDX-License-Identifier: MIT
#include "core/limits/thread_arena.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <bit>
#include <new>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LUA_TASKS_ASAN 1
#endif
#elif defined(__SANITIZE_ADDRESS__)
#define LUA_TASKS_ASAN 1
#endif
#if LUA_TASKS_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace lua_tasks {

namespace {

// Under AddressSanitizer a free part is poisoned, so a use after free of a
// coroutine is still caught (until its slot is handed out again).
#if LUA_TASKS_ASAN
void Poison(void* p, size_t n) {
  ASAN_POISON_MEMORY_REGION(p, n);
}
void Unpoison(void* p, size_t n) {
  ASAN_UNPOISON_MEMORY_REGION(p, n);
}
#else
void Poison(void*, size_t) {}
void Unpoison(void*, size_t) {}
#endif

size_t RoundUp(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

void SetBit(std::vector<uint64_t>& bits, uint32_t i, bool on) {
  const uint64_t bit = uint64_t{1} << (i % 64);
  if (on) {
    bits[i / 64] |= bit;
  } else {
    bits[i / 64] &= ~bit;
  }
}

// The lowest set bit at or after word `from`, or UINT32_MAX; *from moves
// past the leading zero words.
uint32_t LowestSet(const std::vector<uint64_t>& bits, size_t* from) {
  for (size_t w = *from; w < bits.size(); ++w) {
    if (bits[w] != 0) return static_cast<uint32_t>(w * 64 + static_cast<size_t>(std::countr_zero(bits[w])));
    *from = w + 1;
  }
  return UINT32_MAX;
}

}  // namespace

ThreadArena::Mapping::Mapping(size_t bytes, size_t align) noexcept {
  // Map align more than needed, then return the ends around an aligned
  // start to the system.
  const size_t span = bytes + align;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return;
  char* begin = static_cast<char*>(raw);
  char* data = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw) + align - 1) & ~(align - 1));
  if (data > begin) munmap(begin, static_cast<size_t>(data - begin));
  char* tail = data + bytes;
  if (begin + span > tail) munmap(tail, static_cast<size_t>(begin + span - tail));
  data_ = data;
  bytes_ = bytes;
}

ThreadArena::Mapping::~Mapping() {
  if (data_ == nullptr) return;
  Unpoison(data_, bytes_);  // the addresses may be mapped again by anyone
  munmap(data_, bytes_);
}

ThreadArena::~ThreadArena() = default;

void ThreadArena::Layout(size_t state_bytes) noexcept {
  const long page = sysconf(_SC_PAGESIZE);
  state_bytes_ = state_bytes;
  state_span_ = RoundUp(state_bytes, 16);
  slot_bytes_ = state_span_ + kStackBytes;
  slab_bytes_ = RoundUp(slot_bytes_ * kSlabSlots, page > 0 ? static_cast<size_t>(page) : 4096);
  align_ = std::bit_ceil(slab_bytes_);
}

void ThreadArena::MarkHasFree(uint32_t index, bool has) noexcept {
  SetBit(has_free_, index, has);
  if (has && index / 64 < first_free_word_) first_free_word_ = index / 64;
}

ThreadArena::Slab* ThreadArena::Map(uint32_t index) noexcept {
  try {
    if (index >= slabs_.size()) {
      slabs_.resize(index + 1);
      has_free_.resize((slabs_.size() + 63) / 64, 0);
    }
    auto slab = std::make_unique<Slab>(slab_bytes_, align_);
    if (slab->memory.data() == nullptr) return nullptr;
#ifdef MADV_POPULATE_WRITE
    // A runtime past its first slab is filling slabs in order: fault each
    // one in with one call, not page by page (W7's start of a million tasks,
    // 1.2 GB, 1.8 -> 1.5 s). Older kernels refuse it; nothing else changes.
    if (maps_ > 0) madvise(slab->memory.data(), slab_bytes_, MADV_POPULATE_WRITE);
#endif
    for (uint64_t& w : slab->free_bits) w = ~uint64_t{0};
    for (uint8_t& p : slab->parts) p = 0;
    Poison(slab->memory.data(), slab_bytes_);
    by_base_.emplace(reinterpret_cast<uintptr_t>(slab->memory.data()), index);
    slabs_[index] = std::move(slab);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
  ++empty_kept_;
  ++maps_;
  if (unmaps_ > 0 && reserve_ < kMaxReserve) ++reserve_;
  MarkHasFree(index, true);
  return slabs_[index].get();
}

uint32_t ThreadArena::FindSlab(uintptr_t base) const noexcept {
  if (base == last_base_) return last_index_;
  const auto it = by_base_.find(base);
  if (it == by_base_.end()) return kNoSlot;
  last_base_ = base;
  last_index_ = it->second;
  return it->second;
}

void ThreadArena::Unmap(uint32_t index) noexcept {
  const uintptr_t base = reinterpret_cast<uintptr_t>(slabs_[index]->memory.data());
  if (base == last_base_) last_base_ = 0;
  by_base_.erase(base);
  slabs_[index].reset();
  MarkHasFree(index, false);
  ++unmaps_;
}

void* ThreadArena::NewState(size_t bytes) noexcept {
  pending_ = kNoSlot;
  if (bytes > kMaxStateBytes) return nullptr;
  if (state_bytes_ == 0) Layout(bytes);
  if (bytes != state_bytes_) return nullptr;
  // The lowest mapped slab with a free slot; else the lowest unmapped one,
  // or a new one. Preferring an unmapped lower slab to the empty one kept
  // mapped and unmapped a slab at every collection.
  // (Only when every mapped slab is full: a scan of slabs_ is cheap then.)
  uint32_t index = LowestSet(has_free_, &first_free_word_);
  if (index == UINT32_MAX) {
    index = 0;
    while (index < slabs_.size() && slabs_[index] != nullptr) ++index;
  }
  Slab* slab = index < slabs_.size() ? slabs_[index].get() : nullptr;
  if (slab == nullptr && (slab = Map(index)) == nullptr) return nullptr;
  uint32_t slot = 0;
  for (uint32_t w = 0; w < kSlabSlots / 64; ++w) {
    if (slab->free_bits[w] != 0) {
      slot = w * 64 + static_cast<uint32_t>(std::countr_zero(slab->free_bits[w]));
      break;
    }
  }
  slab->free_bits[slot / 64] &= ~(uint64_t{1} << (slot % 64));
  slab->parts[slot] = kState;
  if (slab->live++ == 0) --empty_kept_;
  ++live_;
  if (slab->live == kSlabSlots) MarkHasFree(index, false);
  pending_ = index * kSlabSlots + slot;
  char* state = slab->memory.data() + size_t{slot} * slot_bytes_;
  Unpoison(state, bytes);
  return state;
}

void* ThreadArena::NewStack(size_t bytes) noexcept {
  const uint32_t global = pending_;
  pending_ = kNoSlot;
  // Exactly kStackBytes: Lua frees the stack giving its size, and only
  // blocks of the two known sizes are looked for in the arena.
  if (global == kNoSlot || bytes != kStackBytes) return nullptr;
  Slab* slab = slabs_[global / kSlabSlots].get();
  const uint32_t slot = global % kSlabSlots;
  slab->parts[slot] |= kStack;
  char* stack = slab->memory.data() + size_t{slot} * slot_bytes_ + state_span_;
  Unpoison(stack, bytes);
  return stack;
}

ThreadArena::Where ThreadArena::Locate(const void* p, size_t bytes) const noexcept {
  if (state_bytes_ == 0 || (bytes != state_bytes_ && bytes != kStackBytes)) return {};
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  const uintptr_t base = address & ~(align_ - 1);
  const uint32_t index = FindSlab(base);
  if (index == kNoSlot) return {};
  Slab* slab = slabs_[index].get();
  const size_t offset = address - base;
  const size_t slot = offset / slot_bytes_;
  const size_t within = offset % slot_bytes_;
  const uint8_t part = within == 0 && bytes == state_bytes_            ? kState
                       : within == state_span_ && bytes == kStackBytes ? kStack
                                                                       : 0;
  if (slot >= kSlabSlots || part == 0 || (slab->parts[slot] & part) == 0) return {};
  return {slab, index, static_cast<uint32_t>(slot), part};
}

bool ThreadArena::Free(void* p, size_t bytes) noexcept {
  const Where w = Locate(p, bytes);
  if (w.slab == nullptr) return false;
  Poison(p, bytes);
  uint8_t& parts = w.slab->parts[w.slot];
  parts = static_cast<uint8_t>(parts & ~w.part);
  if (parts != 0) return true;  // the other part is still in use
  w.slab->free_bits[w.slot / 64] |= uint64_t{1} << (w.slot % 64);
  --live_;
  MarkHasFree(w.index, true);
  if (--w.slab->live == 0) {
    if (empty_kept_ >= reserve_) {
      Unmap(w.index);
    } else {
      ++empty_kept_;
    }
  }
  return true;
}

uint32_t ThreadArena::SlotOf(const void* state) const noexcept {
  if (state_bytes_ == 0) return kNoSlot;
  const uintptr_t address = reinterpret_cast<uintptr_t>(state);
  const uintptr_t base = address & ~(align_ - 1);
  const uint32_t index = FindSlab(base);
  if (index == kNoSlot) return kNoSlot;
  const size_t offset = address - base;
  const size_t slot = offset / slot_bytes_;
  if (slot >= kSlabSlots || offset % slot_bytes_ >= state_span_) return kNoSlot;
  if ((slabs_[index]->parts[slot] & kState) == 0) return kNoSlot;
  return index * kSlabSlots + static_cast<uint32_t>(slot);
}

}  // namespace lua_tasks
