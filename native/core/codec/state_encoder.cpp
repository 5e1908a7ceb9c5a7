// SPDX-License-Identifier: MIT
// State codec: the persistent tasks.state table to bytes and back (docs/design.md#persistence).
//
// HOW: one pass over the value graph writes a tagged, little-endian stream,
// then a checksum of it.
//
//   "LTST" 0x04                  magic and format version
//   value                        the root
//   u32 crc                      CRC-32C (crc32c.hpp) of every byte before it
// value:
//   0x00 nil | 0x01 false | 0x02 true
//   0x03 i64                     a Lua integer (8 bytes)
//   0x04 f64                     a Lua float (8 bytes, IEEE bits: -0.0, inf
//                                and nan survive, 1.0 stays a float)
//   0x05 varint n, n bytes       a string: any bytes
//   0x06 u32 n, u32 a, n x (key value)
//                                a table seen for the first time, with n
//                                pairs, a of them its array part (a size
//                                hint, a <= n); it takes the next table
//                                ordinal (0, 1, 2, ... in stream order)
//   0x08 (same as 0x06)          the same, for a table that a 0x07 below
//                                refers to again
//   0x07 varint k                the table with ordinal k, already begun
//                                earlier in the stream: shared references
//                                and cycles come back as one table
//   0x0A (same as 0x05)          a string of kMinSharedString bytes or more
//                                that a 0x09 below refers to again
//   0x09 varint k                the string with string ordinal k: every
//                                string of kMinSharedString bytes or more
//                                (0x05 or 0x0A) takes the next one, in
//                                stream order
// varint: 7 bits a byte, low group first, high bit set on all but the last.
//
// Version 3 is the same without 0x09 and 0x0A; version 2 (written by 0.1.0)
// is version 3 without the checksum. Both are still read (version 2
// unchecked), so states saved before load.
//
// WHY this shape:
// - Fixed-width pair counts let the encoder walk each table once (lua_next)
//   and patch the header after, instead of counting first.
// - The encoder marks a table 0x08 only when it first emits a reference to it
//   (patching the tag byte it already wrote), so the decoder registers just
//   those tables for back-references; unshared tables, the common case, cost
//   no registry traffic.
// - Those patches reach back anywhere in the stream, so the checksum is
//   computed once the stream is complete, as a trailer. The decoder checks it
//   before it builds anything: a damaged file is refused whole, never loaded
//   as different data. CRC-32C detects every error of up to 3 bits at these
//   sizes, and any burst up to 32 bits.
// - A string is written once and referred back to, as a table is: the bytes
//   a value encodes to stay close to the memory it holds in Lua (one 64 KiB
//   string in 16,000 slots of a table is ~250 KiB of Lua memory; written out
//   in full each time it was 1 GiB). Identity is Lua's own (the string
//   object), so short strings, interned by Lua, share too; below
//   kMinSharedString bytes a reference saves too little to pay its lookup.
// - Decoding trusts no count: each table's pairs, plus the pairs still owed
//   by the tables around it, must fit in the bytes left (a pair takes at
//   least 2 bytes), and a string's length must too. So a corrupt or hostile
//   buffer makes us allocate at most a constant times its own size, never
//   what it claims.
// - Both directions are loops over an explicit stack of frames, one per open
//   table, with their Lua values on a thread of their own: a job can stop at
//   any pair boundary and go on in a later loop turn, and nesting costs no C
//   stack. The hot path (a pair of scalars) stays inside one frame's loop.
// - Neither direction may raise a Lua error: they are C++ frames holding
//   std::string and std::vector (STYLE §3). They use raw accessors only, no
//   metamethods, and run under the caller's LuaHost::HostSection, where the
//   allocator does not refuse for the memory limit.
#include "core/codec/state_codec.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "core/base/crc32c.hpp"
#include "core/base/utf8.hpp"
#include "core/host/lua_host.hpp"
#include "core/host/lua_ref.hpp"

namespace lua_tasks {

namespace {

constexpr char kMagic[4] = {'L', 'T', 'S', 'T'};
constexpr uint8_t kVersion = 4;           // written
constexpr uint8_t kNoStringRefs = 3;      // still read: before string references
constexpr uint8_t kUncheckedVersion = 2;  // still read: 0.1.0 wrote it, without the checksum
constexpr size_t kHeaderSize = 5;
constexpr size_t kTrailerSize = 4;  // the CRC-32C
// Bytes of checksum work per unit of StateEncoder's check interval.
constexpr size_t kCrcBytesPerUnit = 256;

enum Tag : uint8_t {
  kNil = 0,
  kFalse = 1,
  kTrue = 2,
  kInt = 3,
  kFloat = 4,
  kString = 5,
  kTable = 6,
  kRef = 7,
  kSharedTable = 8,
  kStringRef = 9,
  kSharedString = 10,
};
// Strings this long or longer take a string ordinal (format above).
constexpr size_t kMinSharedString = 16;

// Table header after its tag: pair count and array hint, both u32.
constexpr size_t kTableHeader = 8;
// Longest key shown in an error path before it is cut with "...".
constexpr size_t kMaxPathKey = 40;

static_assert(std::endian::native == std::endian::little || std::endian::native == std::endian::big);

void Store32(char* p, uint32_t v) {
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap32(v);
  std::memcpy(p, &v, 4);
}

void Store64(char* p, uint64_t v) {
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  std::memcpy(p, &v, 8);
}

uint32_t Load32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap32(v);
  return v;
}

uint64_t Load64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}

// Writes v as a varint at p (room for 10 bytes); returns the bytes written.
size_t StoreVarint(char* p, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    p[n++] = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  p[n++] = static_cast<char>(v);
  return n;
}

// ---------------------------------------------------------------------------
// Encoding

// The snapshot's memory. On Linux, a block of kMapFrom bytes or more is
// pages from mmap, grown with mremap: it grows by remapping its pages, never
// by copying them, and new pages are not zeroed up front. (realloc copies a
// block glibc keeps in its heap, which after a large free is anything up to
// 32 MB: a 15 ms slice.) A smaller block is malloc's: a tasks.store.set
// encodes a record of a few hundred bytes, and an mmap, its page faults and
// its munmap (a TLB shootdown across the process's threads) cost more than
// the encode. A block's capacity says which it is. Elsewhere malloc and
// realloc throughout.
constexpr size_t kMapFrom = size_t{1} << 16;

char* BlockAlloc(size_t n) {
#if defined(__linux__)
  if (n >= kMapFrom) {
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : static_cast<char*>(p);
  }
#endif
  return static_cast<char*>(std::malloc(n));
}

char* BlockGrow(char* p, size_t old_n, size_t n) {
#if defined(__linux__)
  if (old_n >= kMapFrom) {
    void* q = mremap(p, old_n, n, MREMAP_MAYMOVE);
    return q == MAP_FAILED ? nullptr : static_cast<char*>(q);
  }
  if (n >= kMapFrom) {  // a small block becomes pages: at most kMapFrom bytes copied
    char* q = BlockAlloc(n);
    if (q == nullptr) return nullptr;
    std::memcpy(q, p, old_n);
    std::free(p);
    return q;
  }
#endif
  return static_cast<char*>(std::realloc(p, n));
}

void BlockFree(char* p, size_t n) noexcept {
  if (p == nullptr) return;
#if defined(__linux__)
  if (n >= kMapFrom) {
    munmap(p, n);
    return;
  }
#endif
  std::free(p);
}

// Output into one block: Room() hands out space past the committed end,
// growing geometrically, so a value costs a bounds check and a memcpy rather
// than a push_back per byte. The check is inline and the growth is not:
// Room() runs for every value.
class Writer {
 public:
  Writer() = default;
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  ~Writer() { BlockFree(buf_, cap_); }

  char* Room(size_t k) {
    if (cap_ - n_ < k) [[unlikely]]
      Grow(k);
    return buf_ + n_;
  }
  void Commit(size_t k) { n_ += k; }
  size_t size() const { return n_; }
  char* At(size_t offset) { return buf_ + offset; }
  // Hands the block over: *size bytes written, *capacity its size.
  char* Release(size_t* size, size_t* capacity) {
    *size = std::exchange(n_, 0);
    *capacity = std::exchange(cap_, 0);
    return std::exchange(buf_, nullptr);
  }
  void Clear() {
    BlockFree(buf_, cap_);
    buf_ = nullptr;
    cap_ = n_ = 0;
  }

 private:
  static constexpr size_t kGranule = size_t{1} << 16;  // a multiple of any page size
  static constexpr size_t kFirst = 512;                // a record's encoding, most often

  // Throws std::bad_alloc; the job's Step turns it into a failure.
  [[gnu::noinline]] void Grow(size_t k) {
    size_t cap = std::max({cap_ * 2, n_ + k, kFirst});
    // Pages in whole granules; a malloc'd block in 256-byte steps.
    const size_t step = cap >= kMapFrom ? kGranule : 256;
    cap = (cap + step - 1) & ~(step - 1);
    char* p = buf_ == nullptr ? BlockAlloc(cap) : BlockGrow(buf_, cap_, cap);
    if (p == nullptr) throw std::bad_alloc();
    buf_ = p;
    cap_ = cap;
  }

  char* buf_ = nullptr;  // owned: a Block* block of cap_ bytes
  size_t cap_ = 0;       // what Room() may hand out
  size_t n_ = 0;         // bytes committed
};

// Table identity -> (ordinal, header offset): open addressing over pointers,
// no allocation per table. It grows without a pause: a table twice the size
// takes new entries while the old one's move over, kMovePerCall slots a call
// (a state of a million tables rehashed for 20-30 ms in one slice). Arrays
// come zeroed from calloc (an empty slot is all zero bits), so a large one
// costs no memset up front either.
class TableIds {
 public:
  struct Entry {
    const void* key = nullptr;
    uint32_t ordinal = 0;
    uint32_t offset = 0;  // of the table's tag byte; snapshots stay under 2^30 bytes
  };

  TableIds() : slots_(1024) {}

  // Returns the entry already held for e.key, or inserts e and returns null.
  // The entry returned is valid until the next call.
  const Entry* FindOrAdd(const Entry& e) {
    if (old_.size != 0) {
      Move();
    } else if ((count_ + 1) * 2 > slots_.size) {
      old_ = std::move(slots_);
      slots_ = Slots(old_.size * 2);
      moved_ = 0;
    }
    Entry* slot = Probe(slots_, e.key);
    if (slot->key == e.key) return slot;
    if (old_.size != 0) {
      // Not moved yet (moved entries are in slots_, searched first).
      const Entry* before = Probe(old_, e.key);
      if (before->key == e.key) return before;
    }
    *slot = e;
    ++count_;
    return nullptr;
  }
  uint32_t size() const { return count_; }

 private:
  // While old_ moves, slots_ (twice its size) takes at most its entries
  // (a quarter of slots_) plus one per call, and the move ends within
  // old_.size / kMovePerCall calls: slots_ stays under half full. Fast,
  // because a miss meanwhile also probes old_, which is half full: with the
  // clustered hash below those probes run long (at 8 a call, the encoder ran
  // 25% more instructions).
  static constexpr size_t kMovePerCall = 64;

  struct Slots {
    Slots() = default;
    explicit Slots(size_t n) : at(static_cast<Entry*>(std::calloc(n, sizeof(Entry)))), size(n) {
      if (at == nullptr) throw std::bad_alloc();
    }
    Slots(Slots&& o) noexcept : at(std::move(o.at)), size(std::exchange(o.size, 0)) {}
    Slots& operator=(Slots&& o) noexcept {
      at = std::move(o.at);
      size = std::exchange(o.size, 0);
      return *this;
    }
    struct Free {
      void operator()(Entry* p) const noexcept { std::free(p); }
    };
    std::unique_ptr<Entry, Free> at;
    size_t size = 0;  // a power of two
  };

  // The slot holding key, or the empty slot where it would go.
  static Entry* Probe(const Slots& s, const void* key) {
    const size_t mask = s.size - 1;
    Entry* at = s.at.get();
    for (size_t i = Hash(key) & mask;; i = (i + 1) & mask) {
      if (at[i].key == key || at[i].key == nullptr) return &at[i];
    }
  }

  void Move() {
    const size_t end = std::min(old_.size, moved_ + kMovePerCall);
    for (; moved_ < end; ++moved_) {
      const Entry& e = old_.at.get()[moved_];
      if (e.key != nullptr) *Probe(slots_, e.key) = e;
    }
    if (moved_ == old_.size) old_ = Slots();
  }

  // Locality-preserving: tables close in memory (allocated together, and
  // usually walked together) land in nearby slots, so a large state's
  // lookups mostly hit cache. Within each 8 MiB of address space the slot
  // is a plain offset; distinct regions get unrelated starting slots.
  static size_t Hash(const void* p) {
    const uint64_t x = reinterpret_cast<uintptr_t>(p);
    return static_cast<size_t>((x >> 4) + (x >> 23) * 0x9E3779B97F4A7C15ull);
  }

  Slots slots_;         // at most half full
  Slots old_;           // the array before the last growth, while its entries move; else empty
  size_t moved_ = 0;    // old_ slots moved so far
  uint32_t count_ = 0;  // entries in both
};

bool IsName(const char* s, size_t n) {
  static constexpr const char* kReserved[] = {"and",      "break",  "do",   "else", "elseif", "end",  "false", "for",
                                              "function", "goto",   "if",   "in",   "local",  "nil",  "not",   "or",
                                              "repeat",   "return", "then", "true", "until",  "while"};
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (n == 0 || !alpha(s[0])) return false;
  for (size_t i = 1; i < n; ++i) {
    if (!alpha(s[i]) && !(s[i] >= '0' && s[i] <= '9')) return false;
  }
  for (const char* word : kReserved) {
    if (std::strlen(word) == n && std::memcmp(word, s, n) == 0) return false;
  }
  return true;
}

// Appends s as a Lua string literal, cut after kMaxPathKey bytes. Valid UTF-8
// is kept readable; other non-ASCII bytes are escaped so the message stays
// valid UTF-8 on its way to JS.
void AppendQuoted(std::string* p, const char* s, size_t n) {
  const bool utf8 = IsValidUtf8(s, n);
  size_t shown = std::min(n, kMaxPathKey);
  if (utf8) {
    while (shown < n && shown > 0 && (static_cast<unsigned char>(s[shown]) & 0xC0) == 0x80) --shown;
  }
  *p += '"';
  for (size_t i = 0; i < shown; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        *p += "\\\"";
        break;
      case '\\':
        *p += "\\\\";
        break;
      case '\n':
        *p += "\\n";
        break;
      case '\r':
        *p += "\\r";
        break;
      case '\t':
        *p += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7F || (c >= 0x80 && !utf8)) {
          char buf[5];
          std::snprintf(buf, sizeof buf, "\\%03u", c);  // 3 digits: a following digit stays apart
          *p += buf;
        } else {
          *p += static_cast<char>(c);
        }
    }
  }
  *p += '"';
  if (shown < n) *p += "...";
}

// Short strings seen recently, by content: a state repeats its keys ("name",
// "score", ...) in every record, and interning each copy again (hash, then a
// walk of Lua's string table, cold once it holds many strings) was the
// largest cost of decoding. A hit pushes the string from a stack slot
// instead. Two ways per set, so two hot keys that hash alike both stay; a
// miss replaces the way not used last.
class StringCache {
 public:
  static constexpr int kSets = 128;
  static constexpr int kSlots = 2 * kSets;  // Lua stack slots it holds
  static constexpr size_t kMaxLen = 40;     // LUAI_MAXSHORTLEN: longer strings are not interned

  // `base`: the first of kSlots stack slots reserved for it (nil at first).
  explicit StringCache(int base) : base_(base) {}

  // Pushes the string of `n` bytes at `s` (n <= kMaxLen), which lies in a
  // buffer ending at `end` that outlives the cache (the snapshot).
  void Push(lua_State* L, const char* s, size_t n, const char* end) {
    uint64_t w[2];
    Words(s, n, end, w);
    const uint64_t h = (w[0] * 0x9E3779B97F4A7C15ull) ^ (w[1] * 0xC2B2AE3D27D4EB4Full) ^ n;
    const size_t set = static_cast<size_t>((h ^ (h >> 29)) * 0xBF58476D1CE4E5B9ull >> 57);  // 7 bits
    Entry* e = &entries_[2 * set];
    for (int way = 0; way < 2; ++way) {
      if (e[way].len == n && e[way].w[0] == w[0] && e[way].w[1] == w[1] &&
          (n <= 16 || std::memcmp(e[way].bytes + 16, s + 16, n - 16) == 0)) {
        mru_[set] = static_cast<uint8_t>(way);
        lua_pushvalue(L, base_ + static_cast<int>(2 * set) + way);
        return;
      }
    }
    const int way = mru_[set] ^ 1;
    mru_[set] = static_cast<uint8_t>(way);
    e[way] = Entry{{w[0], w[1]}, s, n};
    lua_pushlstring(L, s, n);
    lua_copy(L, -1, base_ + static_cast<int>(2 * set) + way);
  }

 private:
  // The first 16 bytes of s as two words, zero past n: most keys then compare
  // whole in two word compares, and longer ones memcmp only their tail.
  static void Words(const char* s, size_t n, const char* end, uint64_t w[2]) {
    if (std::endian::native == std::endian::little && end - s >= 16) {
      std::memcpy(w, s, 16);  // one load pair, then mask off what is not ours
      if (n < 8) {
        w[0] &= n == 0 ? 0 : ~uint64_t{0} >> (64 - 8 * n);
        w[1] = 0;
      } else if (n < 16) {
        w[1] &= n == 8 ? 0 : ~uint64_t{0} >> (64 - 8 * (n - 8));
      }
      return;
    }
    w[0] = w[1] = 0;
    std::memcpy(w, s, std::min<size_t>(n, 16));
  }

  struct Entry {
    uint64_t w[2] = {0, 0};
    const char* bytes = nullptr;
    size_t len = SIZE_MAX;  // empty: matches no length
  };

  int base_;
  Entry entries_[kSlots];
  uint8_t mru_[kSets] = {};  // per set: the way hit or filled last
};

const char* Unpersistable(int type) {
  switch (type) {
    case LUA_TFUNCTION:
      return "function";
    case LUA_TTHREAD:
      return "coroutine";
    case LUA_TLIGHTUSERDATA:
      return "light userdata";
    case LUA_TUSERDATA:
      return "userdata";
    default:
      return "value of an unknown type";
  }
}

// The main thread of L's state: it lives as long as the state, where a job's
// own thread is gone once the job ends.
lua_State* MainThread(lua_State* L) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  lua_State* main = lua_tothread(L, -1);
  lua_pop(L, 1);
  return main;
}

// Where a job stands; both directions end with kDone or kFailed.
enum class Stage : uint8_t { kStart, kBody, kChecksum, kDone, kFailed };

// How much work a Step does between clock checks, and until when. A unit is
// a value, or 256 bytes of string or checksum. At each check it also asks
// the job's CodecGuard: a stop due, or (decoding) the state past its limit,
// halts the job.
class Slice {
 public:
  enum class Halt : uint8_t { kNone, kStop, kMemory };
  explicit Slice(const CodecGuard& guard) : guard_(guard) {}
  const CodecGuard& guard() const { return guard_; }
  Halt halt() const { return halt_; }
  // The state's memory would pass its limit with `more` bytes.
  bool OverMemory(size_t more) const {
    const MemoryBudget* m = guard_.memory;
    return m != nullptr && m->limit != 0 && (m->used > m->limit || more > m->limit - m->used);
  }
  void set_interval(uint32_t units) {
    interval_ = std::max<uint32_t>(units, 1);
    work_ = std::min<int64_t>(work_, interval_);
  }
  uint32_t interval() const { return interval_; }
  void Start(const Clock* clock, int64_t budget_ns) {
    clock_ = clock;
    deadline_ = clock != nullptr ? clock->MonoNs() + budget_ns : 0;
  }
  // Called at a point where the job can stop: true once the budget is spent
  // or the job must halt (halt() says which). Reads the clock once per interval.
  bool Due() {
    if (work_ > 0) [[likely]]
      return false;
    work_ = interval_;
    return Halted() || (clock_ != nullptr && clock_->MonoNs() >= deadline_);
  }
  // The same for bulk work (the checksum) done a chunk at a time.
  bool DueNow() { return Halted() || (clock_ != nullptr && clock_->MonoNs() >= deadline_); }
  void Spend(int64_t units) { work_ -= units; }

 private:
  bool Halted() {
    if (halt_ == Halt::kNone) {
      if (guard_.stop != nullptr && guard_.stop->StopDue()) {
        halt_ = Halt::kStop;
      } else if (OverMemory(0)) {
        halt_ = Halt::kMemory;
      }
    }
    return halt_ != Halt::kNone;
  }

  CodecGuard guard_;
  Halt halt_ = Halt::kNone;
  const Clock* clock_ = nullptr;
  int64_t deadline_ = 0;
  uint32_t interval_ = StateEncoder::kCheckInterval;
  int64_t work_ = StateEncoder::kCheckInterval;  // units left before the next clock read
};

}  // namespace

// ---------------------------------------------------------------------------
// Encoding

// Stack of the job's thread T_: slot 1 the root, then per open table a key
// and a value slot (lua_next's). The table of a frame is the value (or key)
// slot of the frame below it, or the root.
class StateEncoder::Impl {
 public:
  Impl(lua_State* L, int idx, const char* root, const CodecGuard& guard)
      : root_(root),
        max_body_(std::clamp(guard.max_bytes, kHeaderSize + kTrailerSize + 1, kMaxStateBytes) - kTrailerSize),
        slice_(guard) {
    frames_.reserve(kMaxStateDepth);  // never reallocates: frames are held by pointer
    const int abs = lua_absindex(L, idx);
    T_ = lua_newthread(L);
    thread_ = LuaRef::Pop(L);
    lua_pushvalue(L, abs);
    lua_xmove(L, T_, 1);
  }

  CodecProgress Step(const Clock* clock, int64_t budget_ns) {
    slice_.Start(clock, budget_ns);
    switch (stage_) {
      case Stage::kStart: {
        char* p = w_.Room(kHeaderSize);
        std::memcpy(p, kMagic, sizeof kMagic);
        p[4] = static_cast<char>(kVersion);
        w_.Commit(kHeaderSize);
        stage_ = Stage::kBody;
        if (!Value(1, lua_type(T_, 1))) return Failed();
        [[fallthrough]];
      }
      case Stage::kBody: {
        const CodecProgress r = Body();
        if (r == CodecProgress::kMore && slice_.halt() != Slice::Halt::kNone) return Halted();
        if (r != CodecProgress::kDone) return r;
        stage_ = Stage::kChecksum;
        [[fallthrough]];
      }
      case Stage::kChecksum: {
        const CodecProgress r = Checksum();
        if (r == CodecProgress::kMore && slice_.halt() != Slice::Halt::kNone) return Halted();
        return r;
      }
      case Stage::kDone:
        return CodecProgress::kDone;
      case Stage::kFailed:
        return CodecProgress::kFailed;
    }
    return CodecProgress::kFailed;
  }

  CodecProgress progress() const {
    return stage_ == Stage::kDone     ? CodecProgress::kDone
           : stage_ == Stage::kFailed ? CodecProgress::kFailed
                                      : CodecProgress::kMore;
  }
  std::string_view bytes() const { return done_.view(); }
  SnapshotBytes TakeBytes() { return std::move(done_); }
  const std::string& error() const { return error_; }
  CodecFailure failure() const { return failure_; }
  Slice& slice() { return slice_; }

  // Out of memory in the middle of a Step (the output, the table index).
  CodecProgress OutOfMemory() {
    Fail("out of memory", CodecFailure::kNoRoom);
    return Failed();
  }

 private:
  enum Phase : uint8_t {
    kNext,   // no pair open: lua_next gives the next one
    kValue,  // the key (a table) is written: write the value
    kPair,   // the value (a table) is written: the pair is complete
  };
  struct Frame {
    int table;            // stack slot of the table
    int key;              // slot of its current key; the value is at key + 1
    uint32_t header;      // offset of its tag byte; snapshots stay under 2^30 bytes
    uint32_t count;       // pairs written so far
    lua_Unsigned border;  // lua_rawlen at the start: the array hint
    Phase phase;
    bool has_key;  // the key slot is part of the path (see Path)
  };

  // The walk. Returns kMore when the slice is spent (always with the top
  // frame at kNext), kDone when the root is written, kFailed.
  CodecProgress Body() {
    while (!frames_.empty()) {
      Frame* f = &frames_.back();
      const size_t depth = frames_.size();
      if (f->phase == kValue) {
        f->phase = kPair;
        if (!Value(f->key + 1, lua_type(T_, f->key + 1))) return Failed();
        if (frames_.size() != depth) continue;  // a table: its frame goes first
      }
      if (f->phase == kPair && !EndPair(f)) return Failed();
      // The hot loop: pairs of this table until one holds a new table.
      for (;;) {
        if (slice_.Due()) return CodecProgress::kMore;
        if (lua_next(T_, f->table) == 0) {
          EndTable(*f);
          frames_.pop_back();  // the table stays in its slot, for the frame below
          break;
        }
        slice_.Spend(1);
        const int key_type = lua_type(T_, f->key);
        if (!KeyOk(key_type)) return Failed();
        f->has_key = true;
        f->phase = kValue;
        if (!Value(f->key, key_type)) return Failed();
        if (frames_.size() != depth) break;
        f->phase = kPair;
        if (!Value(f->key + 1, lua_type(T_, f->key + 1))) return Failed();
        if (frames_.size() != depth) break;
        if (!EndPair(f)) return Failed();
      }
    }
    return CodecProgress::kDone;
  }

  // Writes the value at `slot` of type `type`. A table seen for the first
  // time gets its header written and a frame pushed; the caller goes on with
  // that frame.
  bool Value(int slot, int type) {
    switch (type) {
      case LUA_TNIL:
        *w_.Room(1) = kNil;
        w_.Commit(1);
        return true;
      case LUA_TBOOLEAN:
        *w_.Room(1) = lua_toboolean(T_, slot) ? kTrue : kFalse;
        w_.Commit(1);
        return true;
      case LUA_TNUMBER: {
        char* p = w_.Room(9);
        if (lua_isinteger(T_, slot)) {
          p[0] = kInt;
          Store64(p + 1, static_cast<uint64_t>(lua_tointeger(T_, slot)));
        } else {
          const double d = lua_tonumber(T_, slot);
          p[0] = kFloat;
          Store64(p + 1, std::bit_cast<uint64_t>(d));
        }
        w_.Commit(9);
        return true;
      }
      case LUA_TSTRING: {
        size_t n;
        const char* s = lua_tolstring(T_, slot, &n);  // a string already: no conversion
        if (n >= kMinSharedString) {
          const TableIds::Entry* seen =
              string_ids_.FindOrAdd({s, string_ids_.size(), static_cast<uint32_t>(w_.size())});
          if (seen != nullptr) {
            *w_.At(seen->offset) = kSharedString;
            char* p = w_.Room(11);
            p[0] = kStringRef;
            w_.Commit(1 + StoreVarint(p + 1, seen->ordinal));
            return true;
          }
        }
        // Checked before Room(): a huge string fails without being copied.
        if (n > max_body_ - std::min(max_body_, w_.size())) return TooLarge();
        char* p = w_.Room(11 + n);
        p[0] = kString;
        const size_t h = 1 + StoreVarint(p + 1, n);
        std::memcpy(p + h, s, n);
        w_.Commit(h + n);
        slice_.Spend(static_cast<int64_t>(n / kCrcBytesPerUnit));
        return true;
      }
      case LUA_TTABLE:
        return Table(slot);
      default:
        return Fail(std::string("cannot persist a ") + Unpersistable(type));
    }
  }

  bool Table(int slot) {
    const size_t header = w_.size();
    if (const TableIds::Entry* seen =
            ids_.FindOrAdd({lua_topointer(T_, slot), ids_.size(), static_cast<uint32_t>(header)})) {
      *w_.At(seen->offset) = kSharedTable;
      char* p = w_.Room(11);
      p[0] = kRef;
      w_.Commit(1 + StoreVarint(p + 1, seen->ordinal));
      return true;
    }
    if (frames_.size() >= static_cast<size_t>(kMaxStateDepth)) {
      return Fail("nested more than " + std::to_string(kMaxStateDepth) + " tables deep");
    }
    // Its key and value slots.
    if (!lua_checkstack(T_, 2)) return Fail("nested too deep for the Lua stack", CodecFailure::kNoRoom);
    *w_.Room(1 + kTableHeader) = kTable;
    w_.Commit(1 + kTableHeader);
    const lua_Unsigned border = lua_rawlen(T_, slot);
    lua_pushnil(T_);  // lua_next's first key
    frames_.push_back({slot, lua_gettop(T_), static_cast<uint32_t>(header), 0, border, kNext, false});
    return true;
  }

  // The value of the pair at the top frame is written: drop it, keep the key
  // for lua_next.
  bool EndPair(Frame* f) {
    lua_settop(T_, f->key);
    ++f->count;  // each pair adds at least 2 bytes, so the size check below bounds it
    f->has_key = false;
    f->phase = kNext;
    return w_.size() <= max_body_ || TooLarge();
  }

  void EndTable(const Frame& f) {
    char* p = w_.At(f.header + 1);
    Store32(p, f.count);
    // The border can exceed the pair count ({1, nil, nil, 4} may report 4):
    // the hint is only ever an array size the decoder can fill.
    Store32(p + 4, static_cast<uint32_t>(std::min<lua_Unsigned>(f.border, f.count)));
  }

  // The stream is complete: checksum it (a chunk between clock reads), then
  // append the checksum.
  CodecProgress Checksum() {
    const size_t chunk = size_t{slice_.interval()} * kCrcBytesPerUnit;
    while (crc_done_ < w_.size()) {
      const size_t n = std::min(chunk, w_.size() - crc_done_);
      crc_ = Crc32c::Update(crc_, std::string_view(w_.At(crc_done_), n));
      crc_done_ += n;
      if (crc_done_ < w_.size() && slice_.DueNow()) return CodecProgress::kMore;
    }
    Store32(w_.Room(kTrailerSize), crc_);
    w_.Commit(kTrailerSize);
    done_.data_ = w_.Release(&done_.size_, &done_.capacity_);
    stage_ = Stage::kDone;
    End();
    return CodecProgress::kDone;
  }

  bool KeyOk(int type) {
    switch (type) {
      case LUA_TFUNCTION:
      case LUA_TTHREAD:
      case LUA_TLIGHTUSERDATA:
      case LUA_TUSERDATA:
        // The path names the table holding the key: the key has no name.
        return Fail(std::string("cannot persist a table key that is a ") + Unpersistable(type));
      default:
        return true;
    }
  }

  bool TooLarge() {
    if (max_body_ + kTrailerSize == kMaxStateBytes) {
      return Fail("snapshot larger than " + std::to_string(kMaxStateBytes >> 20) + " MiB");
    }
    return Fail("encodes to more than " + std::to_string(max_body_ + kTrailerSize) + " bytes", CodecFailure::kTooLarge);
  }

  // The guard said stop: the job ends now.
  CodecProgress Halted() {
    Fail("stopped", CodecFailure::kStopped);
    return Failed();
  }

  // The path to the value being written, in Lua syntax: state.a[3]["b c"].
  // It is made of the key of each frame that has one open.
  std::string Path() const {
    std::string p = root_;
    for (const Frame& f : frames_) {
      if (!f.has_key) continue;
      const int k = f.key;
      switch (lua_type(T_, k)) {
        case LUA_TSTRING: {
          size_t n;
          const char* s = lua_tolstring(T_, k, &n);
          if (IsName(s, n)) {
            p += '.';
            p.append(s, n);
          } else {
            p += '[';
            AppendQuoted(&p, s, n);
            p += ']';
          }
          break;
        }
        case LUA_TNUMBER: {
          char buf[48];
          if (lua_isinteger(T_, k)) {
            std::snprintf(buf, sizeof buf, "[%lld]", static_cast<long long>(lua_tointeger(T_, k)));
          } else {
            const double d = lua_tonumber(T_, k);
            if (std::isinf(d)) {
              std::snprintf(buf, sizeof buf, "[%s1/0]", d < 0 ? "-" : "");
            } else {
              // As Lua writes it (%.14g), with ".0" where it would read as an integer.
              std::snprintf(buf, sizeof buf, "[%.14g", d);
              if (std::strpbrk(buf + 1, ".en") == nullptr) std::strcat(buf, ".0");
              std::strcat(buf, "]");
            }
          }
          p += buf;
          break;
        }
        case LUA_TBOOLEAN:
          p += lua_toboolean(T_, k) ? "[true]" : "[false]";
          break;
        default:  // a table used as a key
          p += "[";
          p += lua_typename(T_, lua_type(T_, k));
          p += "]";
      }
    }
    return p;
  }

  bool Fail(const std::string& what, CodecFailure failure = CodecFailure::kValue) {
    if (error_.empty()) {
      error_ = Path() + ": " + what;
      failure_ = failure;
    }
    return false;
  }

  CodecProgress Failed() {
    stage_ = Stage::kFailed;
    w_.Clear();
    End();
    return CodecProgress::kFailed;
  }

  // Lets go of the thread and every value on it.
  void End() {
    frames_.clear();
    if (T_ != nullptr) lua_settop(T_, 0);
    T_ = nullptr;
    thread_.Reset();
  }

  const char* root_;
  size_t max_body_;            // the stream before the checksum stays within this
  Writer w_;                   // the snapshot being written
  SnapshotBytes done_;         // the snapshot once written
  lua_State* T_ = nullptr;     // the job's thread: owned through thread_, null once ended
  LuaRef thread_;              // anchors T_ (and so every value on it) until the job ends
  TableIds ids_;               // every table begun so far
  TableIds string_ids_;        // every string of kMinSharedString bytes or more written so far
  std::vector<Frame> frames_;  // the open tables, root first
  Slice slice_;
  Stage stage_ = Stage::kStart;
  uint32_t crc_ = 0;  // of the first crc_done_ bytes written
  size_t crc_done_ = 0;
  std::string error_;
  CodecFailure failure_ = CodecFailure::kNone;
};

void SnapshotBytes::Free() noexcept {
  BlockFree(data_, capacity_);
  data_ = nullptr;
  size_ = capacity_ = 0;
}

StateEncoder::StateEncoder(lua_State* L, int idx, const char* root_name, CodecGuard guard)
    : impl_(std::make_unique<Impl>(L, idx, root_name, guard)) {}
StateEncoder::~StateEncoder() = default;
CodecProgress StateEncoder::Step(const Clock* clock, int64_t budget_ns) {
  try {
    return impl_->Step(clock, budget_ns);
  } catch (const std::bad_alloc&) {
    return impl_->OutOfMemory();
  }
}
CodecProgress StateEncoder::progress() const {
  return impl_->progress();
}
std::string_view StateEncoder::bytes() const {
  return impl_->bytes();
}
SnapshotBytes StateEncoder::TakeBytes() {
  return impl_->TakeBytes();
}
const std::string& StateEncoder::error() const {
  return impl_->error();
}
CodecFailure StateEncoder::failure() const {
  return impl_->failure();
}
void StateEncoder::set_check_interval(uint32_t units) {
  impl_->slice().set_interval(units);
}

// ---------------------------------------------------------------------------
// Decoding

// Stack of the job's thread T_: slot 1 a table mapping ordinal + 1 -> shared
// table, then StringCache::kSlots slots for short strings, then the values
// being built: per open table the table, and above it its pending key and
// value.
class StateDecoder::Impl {
 public:
  Impl(lua_State* L, std::string_view bytes, const CodecGuard& guard)
      : bytes_(bytes),
        begin_(bytes.data()),
        p_(bytes.data()),
        end_(bytes.data() + bytes.size()),
        strings_(kCache),
        slice_(guard) {
    frames_.reserve(kMaxStateDepth);  // never reallocates: frames are held by pointer
    main_ = MainThread(L);
    collecting_ = lua_gc(main_, LUA_GCISRUNNING) == 1;
    if (collecting_) lua_gc(main_, LUA_GCSTOP);
    T_ = lua_newthread(L);
    thread_ = LuaRef::Pop(L);
  }
  ~Impl() { RestartCollector(); }

  CodecProgress Step(const Clock* clock, int64_t budget_ns) {
    slice_.Start(clock, budget_ns);
    switch (stage_) {
      case Stage::kStart:
        if (!Header()) return Failed();
        stage_ = Stage::kChecksum;
        [[fallthrough]];
      case Stage::kChecksum: {
        const CodecProgress r = Checksum();
        if (r == CodecProgress::kMore && slice_.halt() != Slice::Halt::kNone) return Halted();
        if (r != CodecProgress::kDone) return r;
        if (!lua_checkstack(T_, 8 + StringCache::kSlots)) {
          return Fail("not enough memory for the Lua stack", CodecFailure::kNoRoom), Failed();
        }
        lua_newtable(T_);                         // kRefs
        lua_settop(T_, 1 + StringCache::kSlots);  // the string cache's slots, nil
        stage_ = Stage::kBody;
        if (Value() == Read::kError) return Failed();
        [[fallthrough]];
      }
      case Stage::kBody: {
        const CodecProgress r = Body();
        if (r == CodecProgress::kMore && slice_.halt() != Slice::Halt::kNone) return Halted();
        if (r != CodecProgress::kDone) return r;
        if (p_ != end_) return Fail("bytes after the value"), Failed();
        stage_ = Stage::kDone;
        RestartCollector();
        return CodecProgress::kDone;
      }
      case Stage::kDone:
        return CodecProgress::kDone;
      case Stage::kFailed:
        return CodecProgress::kFailed;
    }
    return CodecProgress::kFailed;
  }

  CodecProgress progress() const {
    return stage_ == Stage::kDone     ? CodecProgress::kDone
           : stage_ == Stage::kFailed ? CodecProgress::kFailed
                                      : CodecProgress::kMore;
  }

  void PushResult(lua_State* L) {
    lua_xmove(T_, L, 1);
    End();
  }
  const std::string& error() const { return error_; }
  CodecFailure failure() const { return failure_; }
  Slice& slice() { return slice_; }

  CodecProgress OutOfMemory() {
    Fail("out of memory", CodecFailure::kNoRoom);
    return Failed();
  }

 private:
  static constexpr int kRefs =
      1;  // the slot of the shared values' table: ordinal + 1 -> table, -(ordinal + 1) -> string
  static constexpr int kCache = 2;  // the first string cache slot

  enum Phase : uint8_t {
    kPair,     // no pair open: read the next one
    kValueOf,  // the key (a table) is built: read the value
    kStore,    // key and value (a table) are built: store the pair
    kIndexed,  // the value (a table) of array index `index` is built: store it
  };
  struct Frame {
    int table;          // stack slot of the table
    uint32_t left;      // pairs still to read
    uint32_t narr;      // the array hint: keys 1..narr take the fast path
    lua_Integer index;  // for kIndexed
    Phase phase;
    uint8_t key_tag;  // for kValueOf and kStore: the key's tag (StorePair checks it)
  };
  enum class Read : uint8_t { kValue, kTable, kError };

  // Magic, version, size; sets end_ to the end of the stream (before the
  // checksum of version 3).
  bool Header() {
    const size_t n = bytes_.size();
    if (n == 0 || std::memcmp(begin_, kMagic, std::min(n, sizeof kMagic)) != 0) {
      return Refuse("not a lua-tasks state snapshot (bad magic)");
    }
    if (n < kHeaderSize) return Refuse("corrupt state snapshot: truncated header");
    const uint8_t version = static_cast<uint8_t>(begin_[4]);
    if (version != kVersion && version != kNoStringRefs && version != kUncheckedVersion) {
      return Refuse("state snapshot version " + std::to_string(version) +
                    " is not supported (this build reads versions " + std::to_string(kUncheckedVersion) + " to " +
                    std::to_string(kVersion) + ")");
    }
    if (n > kMaxStateBytes) {
      return Refuse("state snapshot larger than " + std::to_string(kMaxStateBytes >> 20) + " MiB");
    }
    const bool checked = version != kUncheckedVersion;
    if (checked) {
      if (n < kHeaderSize + kTrailerSize) return Refuse("corrupt state snapshot: truncated checksum");
      end_ -= kTrailerSize;
    }
    p_ = begin_ + kHeaderSize;
    crc_done_ = checked ? 0 : Size();  // version 2 has nothing to check
    return true;
  }

  size_t Size() const { return static_cast<size_t>(end_ - begin_); }

  // Checks the checksum, a chunk between clock reads.
  CodecProgress Checksum() {
    const size_t chunk = size_t{slice_.interval()} * kCrcBytesPerUnit;
    if (crc_done_ == Size()) return CodecProgress::kDone;
    while (crc_done_ < Size()) {
      const size_t n = std::min(chunk, Size() - crc_done_);
      crc_ = Crc32c::Update(crc_, std::string_view(begin_ + crc_done_, n));
      crc_done_ += n;
      if (crc_done_ < Size() && slice_.DueNow()) return CodecProgress::kMore;
    }
    if (crc_ != Load32(end_)) {
      Refuse("corrupt state snapshot: checksum mismatch");
      return Failed();
    }
    return CodecProgress::kDone;
  }

  // The tables. Returns kMore when the slice is spent (always with the top
  // frame at kPair), kDone when the root is complete, kFailed.
  CodecProgress Body() {
    while (!frames_.empty()) {
      Frame* f = &frames_.back();
      switch (f->phase) {
        case kIndexed:
          lua_rawseti(T_, f->table, f->index);
          break;
        case kValueOf: {
          const Read r = Value();
          if (r == Read::kError) return Failed();
          if (r == Read::kTable) {
            f->phase = kStore;
            continue;  // its frame goes first
          }
          if (!StorePair(f->table, f->key_tag)) return Failed();
          break;
        }
        case kStore:
          if (!StorePair(f->table, f->key_tag)) return Failed();
          break;
        case kPair:
          break;
      }
      f->phase = kPair;
      // The hot loop: pairs of this table until one holds a new table.
      for (;;) {
        if (f->left == 0) {
          frames_.pop_back();  // the table stays on the stack, for the frame below
          break;
        }
        if (slice_.Due()) return CodecProgress::kMore;
        slice_.Spend(1);
        --f->left;
        --owed_;
        // Fast path for the array part: store by index, without pushing the key.
        if (end_ - p_ >= 9 && *p_ == kInt) {
          const auto k = static_cast<lua_Integer>(Load64(p_ + 1));
          if (k >= 1 && static_cast<uint64_t>(k) <= f->narr) {
            p_ += 9;
            const Read r = Value();
            if (r == Read::kError) return Failed();
            if (r == Read::kTable) {
              f->phase = kIndexed;
              f->index = k;
              break;
            }
            lua_rawseti(T_, f->table, k);
            continue;
          }
        }
        if (p_ == end_) return Fail("truncated value"), Failed();
        const uint8_t key_tag = static_cast<uint8_t>(*p_);  // says what the key is without asking Lua
        Read r = Value();
        if (r == Read::kError) return Failed();
        if (r == Read::kTable) {
          f->phase = kValueOf;
          f->key_tag = key_tag;
          break;
        }
        r = Value();
        if (r == Read::kError) return Failed();
        if (r == Read::kTable) {
          f->phase = kStore;
          f->key_tag = key_tag;
          break;
        }
        if (!StorePair(f->table, key_tag)) return Failed();
      }
    }
    return CodecProgress::kDone;
  }

  // Stack: key and value above the table at slot t; pops them into it.
  bool StorePair(int t, uint8_t key_tag) {
    // lua_rawset would raise for these: refuse instead.
    if (key_tag == kNil) return Fail("nil table key");
    if (key_tag == kFloat && std::isnan(lua_tonumber(T_, -2))) return Fail("nan table key");
    lua_rawset(T_, t);
    return true;
  }

  // Pushes one value: a scalar (kValue), or a new table, whose frame it
  // pushes too (kTable), or nothing (kError, error set).
  Read Value() {
    if (p_ == end_) return Fail("truncated value"), Read::kError;
    const uint8_t tag = static_cast<uint8_t>(*p_++);
    switch (tag) {
      case kNil:
        lua_pushnil(T_);
        return Read::kValue;
      case kFalse:
      case kTrue:
        lua_pushboolean(T_, tag == kTrue);
        return Read::kValue;
      case kInt:
      case kFloat: {
        if (end_ - p_ < 8) return Fail("truncated number"), Read::kError;
        const uint64_t v = Load64(p_);
        p_ += 8;
        if (tag == kInt) {
          lua_pushinteger(T_, static_cast<lua_Integer>(v));
        } else {
          lua_pushnumber(T_, std::bit_cast<double>(v));
        }
        return Read::kValue;
      }
      case kString:
      case kSharedString: {
        uint64_t n;
        if (!Varint(&n)) return Read::kError;
        if (n > static_cast<uint64_t>(end_ - p_)) return Fail("string length past the end"), Read::kError;
        if (n <= StringCache::kMaxLen) {
          strings_.Push(T_, p_, n, begin_ + bytes_.size());
        } else {
          if (slice_.OverMemory(n)) return OverLimit(), Read::kError;
          lua_pushlstring(T_, p_, n);
          slice_.Spend(static_cast<int64_t>(n / kCrcBytesPerUnit));
        }
        p_ += n;
        if (n >= kMinSharedString) {
          const uint64_t ordinal = strings_seen_++;
          if (tag == kSharedString) {
            lua_pushvalue(T_, -1);
            lua_rawseti(T_, kRefs, -static_cast<lua_Integer>(ordinal) - 1);
          }
        }
        return Read::kValue;
      }
      case kStringRef: {
        uint64_t ordinal;
        if (!Varint(&ordinal)) return Read::kError;
        if (ordinal >= strings_seen_) return Fail("reference to a string not yet seen"), Read::kError;
        if (lua_rawgeti(T_, kRefs, -static_cast<lua_Integer>(ordinal) - 1) != LUA_TSTRING) {
          lua_pop(T_, 1);
          return Fail("reference to a string not marked shared"), Read::kError;
        }
        return Read::kValue;
      }
      case kTable:
      case kSharedTable:
        return Table(tag == kSharedTable) ? Read::kTable : Read::kError;
      case kRef: {
        uint64_t ordinal;
        if (!Varint(&ordinal)) return Read::kError;
        if (ordinal >= tables_) return Fail("reference to a table not yet seen"), Read::kError;
        if (lua_rawgeti(T_, kRefs, static_cast<lua_Integer>(ordinal) + 1) != LUA_TTABLE) {
          lua_pop(T_, 1);
          return Fail("reference to a table not marked shared"), Read::kError;
        }
        return Read::kValue;
      }
      default:
        --p_;
        return Fail("unknown value tag " + std::to_string(tag)), Read::kError;
    }
  }

  bool Table(bool shared) {
    if (frames_.size() >= static_cast<size_t>(kMaxStateDepth)) {
      return Fail("nested more than " + std::to_string(kMaxStateDepth) + " tables deep");
    }
    // 3: the table, a key, a value.
    if (!lua_checkstack(T_, 3)) return Fail("not enough memory for the Lua stack", CodecFailure::kNoRoom);
    if (end_ - p_ < static_cast<ptrdiff_t>(kTableHeader)) return Fail("truncated table header");
    const uint64_t count = Load32(p_);
    const uint64_t narr = Load32(p_ + 4);
    p_ += kTableHeader;
    if (narr > count) return Fail("array size larger than the table");
    // Every pair owed, here and by the enclosing tables, needs 2 bytes.
    if (2 * (owed_ + count) > static_cast<uint64_t>(end_ - p_)) return Fail("table count past the end");
    // Its parts are allocated whole (a slot of 16 bytes, a node of 24).
    if (slice_.OverMemory(16 * narr + 24 * (count - narr))) return OverLimit();
    // Both fit in int: count <= kMaxStateBytes / 2.
    lua_createtable(T_, static_cast<int>(narr), static_cast<int>(count - narr));
    const uint64_t ordinal = tables_++;
    if (shared) {
      // Registered before its contents, so cycles back to it resolve.
      lua_pushvalue(T_, -1);
      lua_rawseti(T_, kRefs, static_cast<lua_Integer>(ordinal) + 1);
    }
    owed_ += count;
    frames_.push_back({lua_gettop(T_), static_cast<uint32_t>(count), static_cast<uint32_t>(narr), 0, kPair, 0});
    return true;
  }

  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) return Fail("truncated length");
      const uint8_t b = static_cast<uint8_t>(*p_++);
      *v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return Fail("malformed length");
  }

  // A structural error: what, and where.
  bool Fail(const std::string& what, CodecFailure failure = CodecFailure::kCorrupt) {
    if (error_.empty()) {
      error_ = (failure == CodecFailure::kCorrupt ? "corrupt state snapshot: " : "cannot restore the state: ") + what +
               " at byte " + std::to_string(p_ - begin_);
      failure_ = failure;
    }
    return false;
  }
  // Decoding would take the state past its memoryLimit (CodecGuard::memory).
  bool OverLimit() {
    return Fail("it needs more memory than the state's memoryLimit (" +
                    std::to_string(slice_.guard().memory->limit >> 10) + " KiB) leaves",
                CodecFailure::kNoRoom);
  }
  // The guard halted the job: a stop, or the memory limit.
  CodecProgress Halted() {
    if (slice_.halt() == Slice::Halt::kStop) {
      Fail("stopped", CodecFailure::kStopped);
    } else {
      OverLimit();
    }
    return Failed();
  }

  // An error in the header or the checksum: the whole snapshot is refused.
  bool Refuse(const std::string& what) {
    error_ = what;
    failure_ = CodecFailure::kCorrupt;
    return false;
  }

  CodecProgress Failed() {
    stage_ = Stage::kFailed;
    End();
    return CodecProgress::kFailed;
  }

  // Lets go of the thread and everything on it; the collector runs again.
  void End() {
    frames_.clear();
    if (T_ != nullptr) lua_settop(T_, 0);
    T_ = nullptr;
    thread_.Reset();
    RestartCollector();
  }

  void RestartCollector() {
    if (collecting_) lua_gc(main_, LUA_GCRESTART);
    collecting_ = false;
  }

  std::string_view bytes_;   // the snapshot: the caller keeps it alive
  const char* begin_;        // bytes_.data(), for offsets in errors
  const char* p_;            // next byte to read
  const char* end_;          // end of the stream (before the checksum)
  lua_State* main_;          // for the collector: lives as long as the state
  lua_State* T_ = nullptr;   // the job's thread: owned through thread_, null once ended
  LuaRef thread_;            // anchors T_ and the values being built
  bool collecting_ = false;  // the collector ran when the job began: restart it at the end
  StringCache strings_;
  std::vector<Frame> frames_;  // the open tables, root first
  Slice slice_;
  Stage stage_ = Stage::kStart;
  uint32_t crc_ = 0;  // of bytes_[0, crc_done_)
  size_t crc_done_ = 0;
  uint64_t tables_ = 0;        // tables begun so far: the next ordinal
  uint64_t strings_seen_ = 0;  // strings of kMinSharedString bytes or more so far: the next string ordinal
  uint64_t owed_ = 0;          // pairs the open tables still expect, beyond the current ones
  std::string error_;
  CodecFailure failure_ = CodecFailure::kNone;
};

StateDecoder::StateDecoder(lua_State* L, std::string_view bytes, CodecGuard guard)
    : impl_(std::make_unique<Impl>(L, bytes, guard)) {}
StateDecoder::~StateDecoder() = default;
CodecProgress StateDecoder::Step(const Clock* clock, int64_t budget_ns) {
  try {
    return impl_->Step(clock, budget_ns);
  } catch (const std::bad_alloc&) {
    return impl_->OutOfMemory();
  }
}
CodecProgress StateDecoder::progress() const {
  return impl_->progress();
}
void StateDecoder::PushResult(lua_State* L) {
  impl_->PushResult(L);
}
const std::string& StateDecoder::error() const {
  return impl_->error();
}
CodecFailure StateDecoder::failure() const {
  return impl_->failure();
}
void StateDecoder::set_check_interval(uint32_t units) {
  impl_->slice().set_interval(units);
}

// ---------------------------------------------------------------------------
// One-shot

bool SnapshotFrameIntact(std::string_view bytes, std::string* why) {
  if (bytes.size() < kHeaderSize + kTrailerSize || bytes.substr(0, sizeof kMagic) != std::string_view(kMagic, 4)) {
    *why = "not a lua-tasks value snapshot";
    return false;
  }
  if (const uint8_t v = static_cast<uint8_t>(bytes[4]); v != kVersion && v != kNoStringRefs) {
    *why = "value snapshot version " + std::to_string(v) + " is not supported";
    return false;
  }
  const size_t body = bytes.size() - kTrailerSize;
  if (Crc32c::Update(0, bytes.substr(0, body)) != Load32(bytes.data() + body)) {
    *why = "checksum mismatch";
    return false;
  }
  return true;
}

bool EncodeState(lua_State* L, int idx, std::string* out, std::string* error, const char* root_name,
                 const CodecGuard& guard, CodecFailure* failure) {
  StateEncoder e(L, idx, root_name, guard);
  if (e.Finish() != CodecProgress::kDone) {
    out->clear();
    *error = e.error();
    if (failure != nullptr) *failure = e.failure();
    return false;
  }
  out->assign(e.bytes());
  error->clear();
  if (failure != nullptr) *failure = CodecFailure::kNone;
  return true;
}

bool DecodeState(lua_State* L, std::string_view bytes, std::string* error, CodecFailure* failure,
                 const CodecGuard& guard) {
  StateDecoder d(L, bytes, guard);
  CodecFailure why = CodecFailure::kNone;
  if (d.Finish() != CodecProgress::kDone) {
    *error = d.error();
    why = d.failure();
  } else if (!lua_checkstack(L, 1)) {
    *error = "cannot restore the state: not enough memory for the Lua stack";
    why = CodecFailure::kNoRoom;
  } else {
    d.PushResult(L);
    error->clear();
  }
  if (failure != nullptr) *failure = why;
  return why == CodecFailure::kNone;
}

}  // namespace lua_tasks
