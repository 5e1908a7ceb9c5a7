// SPDX-License-Identifier: MIT
// ThreadArena: the memory of Lua coroutines, in address order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace lua_tasks {

// Lua's collector ends each cycle with an atomic step that walks every live
// coroutine once more, chasing a linked list through them, and writes over
// each one's stack. With half a million tasks asleep that step is one stall
// of the loop, and its length is set by where the coroutines sit: made where
// ended ones were freed, they lie scattered and every step of the chase is a
// cache miss (bench W7: 100 ns a coroutine, a 50 ms stall at 510,000).
//
// Here a coroutine's state and its first stack share a slot, and slots are
// handed out lowest first, from the lowest mapped slab of kSlabSlots with
// room (a new slab only when none has). A task's anchor slot is
// its arena slot (ThreadAnchors), so the collector meets coroutines in the
// order they lie in memory, which the prefetcher follows (65 ns a coroutine,
// 33 ms at 510,000).
//
// The allocator (MemoryBudget) recognises the two blocks: Lua tags a new
// coroutine's block with LUA_TTHREAD, and the very next allocation is its
// stack. A stack that Lua grows moves to the heap; a size that does not fit
// (another Lua build) stays on the heap. Freeing a slot's last part frees the
// slot; an empty slab is unmapped, but one is kept to spare a workload making
// and dropping a single coroutine from mapping each time, and more once the
// workload has come back for slabs that were unmapped (see reserve_).
class ThreadArena {
 public:
  static constexpr uint32_t kSlabSlots = 1024;  // = ThreadAnchors::kChunk: a slab is an anchor chunk
  static constexpr uint32_t kNoSlot = UINT32_MAX;
  // Lua 5.4 gives a new coroutine 2 * LUA_MINSTACK + 5 (EXTRA_STACK) slots
  // of 16 bytes; its state block is sizeof(lua_State) + LUA_EXTRASPACE.
  static constexpr size_t kStackBytes = (2 * 20 + 5) * 16;
  static constexpr size_t kMaxStateBytes = 512;  // a main state (lua_newstate, with its global_State) is larger

  ThreadArena() = default;
  ~ThreadArena();
  ThreadArena(const ThreadArena&) = delete;
  ThreadArena& operator=(const ThreadArena&) = delete;

  // A slot's state part for a new coroutine of `bytes`, or nullptr (too big,
  // or no memory for a slab): the caller then uses the heap.
  void* NewState(size_t bytes) noexcept;
  // The slot's stack part, if the state was the allocation just before and
  // `bytes` fits; else nullptr. Every allocation calls it (or Forget) once,
  // so a stack is only ever placed right after its state.
  void* NewStack(size_t bytes) noexcept;
  void Forget() noexcept { pending_ = kNoSlot; }

  // If p is a part in the arena (Lua gave its size as `bytes`), frees it and
  // returns true.
  bool Free(void* p, size_t bytes) noexcept;
  // Whether p is a part in the arena.
  bool Owns(const void* p, size_t bytes) const noexcept { return Locate(p, bytes).slab != nullptr; }

  // The slot of a coroutine whose state is in the arena, else kNoSlot.
  uint32_t SlotOf(const void* state) const noexcept;

  size_t mapped_slabs() const { return by_base_.size(); }
  size_t maps() const { return maps_; }  // slabs mapped so far
  uint32_t reserve() const { return reserve_; }
  size_t live_slots() const { return live_; }

 private:
  // An anonymous mapping of `bytes` at a multiple of `align`; unmapped on
  // destruction.
  class Mapping {
   public:
    Mapping(size_t bytes, size_t align) noexcept;
    ~Mapping();
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;
    char* data() const { return data_; }

   private:
    char* data_ = nullptr;
    size_t bytes_ = 0;
  };
  struct Slab {
    Slab(size_t bytes, size_t align) noexcept : memory(bytes, align) {}
    Mapping memory;
    uint32_t live = 0;                    // slots with a part in use
    uint64_t free_bits[kSlabSlots / 64];  // 1 = free
    uint8_t parts[kSlabSlots];            // kState | kStack
  };
  struct Where {
    Slab* slab = nullptr;
    uint32_t index = 0;  // slab index
    uint32_t slot = 0;   // within the slab
    uint8_t part = 0;
  };
  static constexpr uint8_t kState = 1;
  static constexpr uint8_t kStack = 2;

  Where Locate(const void* p, size_t bytes) const noexcept;
  uint32_t FindSlab(uintptr_t base) const noexcept;  // the index of the slab mapped at base, or kNoSlot
  void Layout(size_t state_bytes) noexcept;          // fixes the slot layout at the first coroutine
  Slab* Map(uint32_t index) noexcept;
  void Unmap(uint32_t index) noexcept;
  void MarkHasFree(uint32_t index, bool has) noexcept;

  size_t state_bytes_ = 0;  // 0 until the first coroutine
  size_t state_span_ = 0;   // state_bytes_ rounded up to 16: where the stack part starts
  size_t slot_bytes_ = 0;
  size_t slab_bytes_ = 0;
  size_t align_ = 0;  // a power of two >= slab_bytes_: a part's slab is found by masking its address
  std::vector<std::unique_ptr<Slab>> slabs_;         // by index; null when unmapped
  std::vector<uint64_t> has_free_;                   // by slab index: 1 = mapped, with a slot free
  std::unordered_map<uintptr_t, uint32_t> by_base_;  // mapped slab base -> index
  mutable uintptr_t last_base_ = 0;                  // the last slab found, as a lookup usually repeats it
  mutable uint32_t last_index_ = 0;
  size_t first_free_word_ = 0;  // has_free_ words below this are 0
  uint32_t empty_kept_ = 0;     // mapped slabs with no slot in use
  // How many empty slabs stay mapped. One at first, so slabs filled once and
  // emptied (a burst of tasks that ends) go back to the system at once; each
  // slab mapped again after an unmap raises it by one, up to kMaxReserve
  // (15 MB), so a workload that fills and empties the same slabs over and
  // over (10,000 tasks a run in W2 and W5) stops paying the kernel to zero
  // their pages again (MADV_POPULATE_WRITE) and to unmap them: a fifth of
  // the time of W5's starts. It never shrinks: a runtime keeps at most that
  // much mapped for coroutines it may not make again.
  static constexpr uint32_t kMaxReserve = 16;
  uint32_t reserve_ = 1;
  size_t unmaps_ = 0;
  size_t live_ = 0;
  size_t maps_ = 0;
  uint32_t pending_ = kNoSlot;  // global slot whose state was the last allocation
};

}  // namespace lua_tasks
