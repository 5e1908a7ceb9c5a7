// SPDX-License-Identifier: MIT
// State codec: the persistent tasks.state table to bytes and back (DESIGN §8).
//
// HOW: one pass over the value graph writes a tagged, little-endian stream.
//
//   "LTST" 0x02                  magic and format version
//   value                        the root
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
// varint: 7 bits a byte, low group first, high bit set on all but the last.
//
// WHY this shape:
// - Fixed-width pair counts let the encoder walk each table once (lua_next)
//   and patch the header after, instead of counting first.
// - The encoder marks a table 0x08 only when it first emits a reference to it
//   (patching the tag byte it already wrote), so the decoder registers just
//   those tables for back-references; unshared tables, the common case, cost
//   no registry traffic.
// - Decoding trusts no count: each table's pairs, plus the pairs still owed
//   by the tables around it, must fit in the bytes left (a pair takes at
//   least 2 bytes), and a string's length must too. So a corrupt or hostile
//   buffer makes us allocate at most a constant times its own size, never
//   what it claims.
// - Neither direction may raise a Lua error: they are C++ frames holding
//   std::string and std::vector (STYLE §3). They use raw accessors only, no
//   metamethods, and run under the caller's LuaHost::HostSection, where the
//   allocator does not refuse for the memory limit.
#include "state_codec.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "utf8.hpp"

namespace lua_tasks {

namespace {

constexpr char kMagic[4] = {'L', 'T', 'S', 'T'};
constexpr uint8_t kVersion = 2;
constexpr size_t kHeaderSize = 5;

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
};

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

// Output straight into the caller's string: Room() hands out space past the
// committed end, growing geometrically, so a value costs a bounds check and a
// memcpy rather than a push_back per byte.
// The check is inline and the growth is not: Room() runs for every value.
class Writer {
 public:
  explicit Writer(std::string* s) : s_(s) {
    s_->resize(std::max(s_->capacity(), size_t{1} << 16));
    buf_ = s_->data();
    cap_ = s_->size();
  }
  char* Room(size_t k) {
    if (cap_ - n_ < k) [[unlikely]]
      Grow(k);
    return buf_ + n_;
  }
  void Commit(size_t k) { n_ += k; }
  size_t size() const { return n_; }
  char* At(size_t offset) { return buf_ + offset; }
  void Finish() { s_->resize(n_); }

 private:
  [[gnu::noinline]] void Grow(size_t k) {
    s_->resize(std::max(cap_ * 2, n_ + k));
    buf_ = s_->data();
    cap_ = s_->size();
  }

  std::string* s_;
  char* buf_;     // s_->data(), refreshed when it grows
  size_t cap_;    // s_->size(): what Room() may hand out
  size_t n_ = 0;  // bytes committed
};

// Table identity -> (ordinal, header offset): open addressing over pointers,
// no allocation per table.
class TableIds {
 public:
  struct Entry {
    const void* key = nullptr;
    uint32_t ordinal = 0;
    uint32_t offset = 0;  // of the table's tag byte; snapshots stay under 2^30 bytes
  };

  TableIds() : slots_(1024) {}

  // Returns the entry already held for e.key, or inserts e and returns null.
  const Entry* FindOrAdd(const Entry& e) {
    if ((count_ + 1) * 2 > slots_.size()) Grow();
    const size_t mask = slots_.size() - 1;
    for (size_t i = Hash(e.key) & mask;; i = (i + 1) & mask) {
      if (slots_[i].key == e.key) return &slots_[i];
      if (slots_[i].key == nullptr) {
        slots_[i] = e;
        ++count_;
        return nullptr;
      }
    }
  }
  uint32_t size() const { return count_; }

 private:
  // Locality-preserving: tables close in memory (allocated together, and
  // usually walked together) land in nearby slots, so a large state's
  // lookups mostly hit cache. Within each 8 MiB of address space the slot
  // is a plain offset; distinct regions get unrelated starting slots.
  static size_t Hash(const void* p) {
    const uint64_t x = reinterpret_cast<uintptr_t>(p);
    return static_cast<size_t>((x >> 4) + (x >> 23) * 0x9E3779B97F4A7C15ull);
  }
  void Grow() {
    std::vector<Entry> old(slots_.size() * 2);
    old.swap(slots_);
    count_ = 0;
    for (const Entry& e : old) {
      if (e.key != nullptr) FindOrAdd(e);
    }
  }
  std::vector<Entry> slots_;  // size a power of two, at most half full
  uint32_t count_ = 0;
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

class Encoder {
 public:
  Encoder(lua_State* L, std::string* out, std::string* error, const char* root)
      : L_(L), w_(out), error_(error), root_(root) {}

  // Appends the value at absolute index idx, of Lua type `type`.
  bool Value(int idx, int type) {
    switch (type) {
      case LUA_TNIL:
        *w_.Room(1) = kNil;
        w_.Commit(1);
        return true;
      case LUA_TBOOLEAN:
        *w_.Room(1) = lua_toboolean(L_, idx) ? kTrue : kFalse;
        w_.Commit(1);
        return true;
      case LUA_TNUMBER: {
        char* p = w_.Room(9);
        if (lua_isinteger(L_, idx)) {
          p[0] = kInt;
          Store64(p + 1, static_cast<uint64_t>(lua_tointeger(L_, idx)));
        } else {
          const double d = lua_tonumber(L_, idx);
          p[0] = kFloat;
          Store64(p + 1, std::bit_cast<uint64_t>(d));
        }
        w_.Commit(9);
        return true;
      }
      case LUA_TSTRING: {
        size_t n;
        const char* s = lua_tolstring(L_, idx, &n);  // a string already: no conversion
        // Checked before Room(): a huge string fails without being copied.
        if (n > kMaxStateBytes - w_.size()) return TooLarge();
        char* p = w_.Room(11 + n);
        p[0] = kString;
        const size_t h = 1 + StoreVarint(p + 1, n);
        std::memcpy(p + h, s, n);
        w_.Commit(h + n);
        return true;
      }
      case LUA_TTABLE:
        return Table(idx);
      default:
        return Fail(std::string("cannot persist a ") + Unpersistable(type));
    }
  }

  bool Header() {
    char* p = w_.Room(kHeaderSize);
    std::memcpy(p, kMagic, sizeof kMagic);
    p[4] = static_cast<char>(kVersion);
    w_.Commit(kHeaderSize);
    return true;
  }

  void Finish() { w_.Finish(); }

 private:
  static const char* Unpersistable(int type) {
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

  // Stack: uses two slots above the top while it walks (key, value), leaves
  // none. On failure it returns at once, leaving them for EncodeState's
  // settop, so that Fail can read the key slots of the whole path.
  bool Table(int idx) {
    const size_t header = w_.size();
    if (const TableIds::Entry* seen =
            ids_.FindOrAdd({lua_topointer(L_, idx), ids_.size(), static_cast<uint32_t>(header)})) {
      *w_.At(seen->offset) = kSharedTable;
      char* p = w_.Room(11);
      p[0] = kRef;
      w_.Commit(1 + StoreVarint(p + 1, seen->ordinal));
      return true;
    }
    if (static_cast<int>(keys_.size()) >= kMaxStateDepth) {
      return Fail("nested more than " + std::to_string(kMaxStateDepth) + " tables deep");
    }
    // 2 for key and value; each level needs its own, so check per level.
    if (!lua_checkstack(L_, 2)) return Fail("nested too deep for the Lua stack");
    *w_.Room(1 + kTableHeader) = kTable;
    w_.Commit(1 + kTableHeader);
    const lua_Unsigned border = lua_rawlen(L_, idx);
    const int key = lua_gettop(L_) + 1;
    uint32_t count = 0;
    lua_pushnil(L_);
    while (lua_next(L_, idx) != 0) {
      const int key_type = lua_type(L_, key);
      if (!KeyOk(key_type)) return false;
      keys_.push_back(key);
      if (!Value(key, key_type) || !Value(key + 1, lua_type(L_, key + 1))) return false;
      keys_.pop_back();
      lua_settop(L_, key);
      ++count;  // each pair adds at least 2 bytes, so the size check below bounds it
      if (w_.size() > kMaxStateBytes) return TooLarge();
    }
    char* p = w_.At(header + 1);
    Store32(p, count);
    // The border can exceed the pair count ({1, nil, nil, 4} may report 4):
    // the hint is only ever an array size the decoder can fill.
    Store32(p + 4, static_cast<uint32_t>(std::min<lua_Unsigned>(border, count)));
    return true;
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

  bool TooLarge() { return Fail("snapshot larger than " + std::to_string(kMaxStateBytes >> 20) + " MiB"); }

  // The path to the value being written, in Lua syntax: state.a[3]["b c"].
  std::string Path() const {
    std::string p = root_;
    for (int k : keys_) {
      switch (lua_type(L_, k)) {
        case LUA_TSTRING: {
          size_t n;
          const char* s = lua_tolstring(L_, k, &n);
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
          if (lua_isinteger(L_, k)) {
            std::snprintf(buf, sizeof buf, "[%lld]", static_cast<long long>(lua_tointeger(L_, k)));
          } else {
            const double d = lua_tonumber(L_, k);
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
          p += lua_toboolean(L_, k) ? "[true]" : "[false]";
          break;
        default:  // a table used as a key
          p += "[";
          p += lua_typename(L_, lua_type(L_, k));
          p += "]";
      }
    }
    return p;
  }

  bool Fail(const std::string& what) {
    if (error_->empty()) *error_ = Path() + ": " + what;
    return false;
  }

  lua_State* L_;
  Writer w_;
  std::string* error_;
  const char* root_;
  TableIds ids_;           // every table begun so far
  std::vector<int> keys_;  // stack slots of the keys from the root to the current value
};

// ---------------------------------------------------------------------------
// Decoding

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

class Decoder {
 public:
  // `refs` is the stack slot of a table mapping ordinal + 1 -> shared table;
  // `cache` the first of StringCache::kSlots slots for short strings.
  Decoder(lua_State* L, std::string_view bytes, int refs, int cache)
      : L_(L),
        begin_(bytes.data()),
        p_(bytes.data() + kHeaderSize),
        end_(bytes.data() + bytes.size()),
        refs_(refs),
        strings_(cache) {}

  // Pushes one value. On failure returns false with error set; the stack may
  // hold partial values (DecodeState resets it).
  bool Value(int depth) {
    if (p_ == end_) return Fail("truncated value");
    const uint8_t tag = static_cast<uint8_t>(*p_++);
    switch (tag) {
      case kNil:
        lua_pushnil(L_);
        return true;
      case kFalse:
      case kTrue:
        lua_pushboolean(L_, tag == kTrue);
        return true;
      case kInt:
      case kFloat: {
        if (end_ - p_ < 8) return Fail("truncated number");
        const uint64_t v = Load64(p_);
        p_ += 8;
        if (tag == kInt) {
          lua_pushinteger(L_, static_cast<lua_Integer>(v));
        } else {
          lua_pushnumber(L_, std::bit_cast<double>(v));
        }
        return true;
      }
      case kString: {
        uint64_t n;
        if (!Varint(&n)) return false;
        if (n > static_cast<uint64_t>(end_ - p_)) return Fail("string length past the end");
        if (n <= StringCache::kMaxLen) {
          strings_.Push(L_, p_, n, end_);
        } else {
          lua_pushlstring(L_, p_, n);
        }
        p_ += n;
        return true;
      }
      case kTable:
      case kSharedTable:
        return Table(depth, tag == kSharedTable);
      case kRef: {
        uint64_t ordinal;
        if (!Varint(&ordinal)) return false;
        if (ordinal >= tables_) return Fail("reference to a table not yet seen");
        if (lua_rawgeti(L_, refs_, static_cast<lua_Integer>(ordinal) + 1) != LUA_TTABLE) {
          return Fail("reference to a table not marked shared");
        }
        return true;
      }
      default:
        --p_;
        return Fail("unknown value tag " + std::to_string(tag));
    }
  }

  bool AtEnd() { return p_ == end_ || Fail("bytes after the value"); }
  const std::string& error() const { return error_; }

 private:
  bool Table(int depth, bool shared) {
    if (depth >= kMaxStateDepth) {
      return Fail("nested more than " + std::to_string(kMaxStateDepth) + " tables deep");
    }
    // 3: the table, a key, a value.
    if (!lua_checkstack(L_, 3)) return Fail("nested too deep for the Lua stack");
    if (end_ - p_ < static_cast<ptrdiff_t>(kTableHeader)) return Fail("truncated table header");
    const uint64_t count = Load32(p_);
    const uint64_t narr = Load32(p_ + 4);
    p_ += kTableHeader;
    if (narr > count) return Fail("array size larger than the table");
    // Every pair owed, here and by the enclosing tables, needs 2 bytes.
    if (2 * (owed_ + count) > static_cast<uint64_t>(end_ - p_)) return Fail("table count past the end");
    // Both fit in int: count <= kMaxStateBytes / 2.
    lua_createtable(L_, static_cast<int>(narr), static_cast<int>(count - narr));
    const uint64_t ordinal = tables_++;
    if (shared) {
      // Registered before its contents, so cycles back to it resolve.
      lua_pushvalue(L_, -1);
      lua_rawseti(L_, refs_, static_cast<lua_Integer>(ordinal) + 1);
    }
    const int t = lua_gettop(L_);
    owed_ += count;
    for (uint64_t i = 0; i < count; ++i) {
      --owed_;
      // Fast path for the array part: store by index, without pushing the key.
      if (end_ - p_ >= 9 && *p_ == kInt) {
        const auto k = static_cast<lua_Integer>(Load64(p_ + 1));
        if (k >= 1 && static_cast<uint64_t>(k) <= narr) {
          p_ += 9;
          if (!Value(depth + 1)) return false;
          lua_rawseti(L_, t, k);
          continue;
        }
      }
      if (p_ == end_) return Fail("truncated value");
      const uint8_t key_tag = static_cast<uint8_t>(*p_);  // says what the key is without asking Lua
      if (!Value(depth + 1) || !Value(depth + 1)) return false;
      // lua_rawset would raise for these: refuse instead.
      if (key_tag == kNil) return Fail("nil table key");
      if (key_tag == kFloat && std::isnan(lua_tonumber(L_, t + 1))) return Fail("nan table key");
      lua_rawset(L_, t);
    }
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

  bool Fail(const std::string& what) {
    if (error_.empty()) error_ = what + " at byte " + std::to_string(p_ - begin_);
    return false;
  }

  lua_State* L_;
  const char* begin_;  // the snapshot, for offsets in errors
  const char* p_;      // next byte to read
  const char* end_;
  int refs_;
  StringCache strings_;
  uint64_t tables_ = 0;  // tables begun so far: the next ordinal
  uint64_t owed_ = 0;    // pairs the open tables still expect, beyond the current ones
  std::string error_;
};

}  // namespace

bool EncodeState(lua_State* L, int idx, std::string* out, std::string* error, const char* root_name) {
  error->clear();
  out->clear();
  const int top = lua_gettop(L);
  const int abs = lua_absindex(L, idx);
  Encoder e(L, out, error, root_name);
  const bool ok = e.Header() && e.Value(abs, lua_type(L, abs));
  e.Finish();
  lua_settop(L, top);
  if (!ok) out->clear();
  return ok;
}

bool DecodeState(lua_State* L, std::string_view bytes, std::string* error) {
  error->clear();
  if (bytes.empty() || std::memcmp(bytes.data(), kMagic, std::min(bytes.size(), sizeof kMagic)) != 0) {
    *error = "not a lua-tasks state snapshot (bad magic)";
    return false;
  }
  if (bytes.size() < kHeaderSize) {
    *error = "corrupt state snapshot: truncated header";
    return false;
  }
  if (static_cast<uint8_t>(bytes[4]) != kVersion) {
    *error = "state snapshot version " + std::to_string(static_cast<uint8_t>(bytes[4])) +
             " is not supported (this build reads version " + std::to_string(kVersion) + ")";
    return false;
  }
  if (bytes.size() > kMaxStateBytes) {
    *error = "state snapshot larger than " + std::to_string(kMaxStateBytes >> 20) + " MiB";
    return false;
  }
  const int top = lua_gettop(L);
  if (!lua_checkstack(L, 8 + StringCache::kSlots)) {
    *error = "cannot restore the state: Lua stack overflow";
    return false;
  }
  lua_newtable(L);                               // ordinal + 1 -> shared table
  lua_settop(L, top + 1 + StringCache::kSlots);  // the string cache's slots
  // Everything decoded stays live until we return, so a collection would be
  // wasted work. (Stopping also keeps finalizers from running mid-decode.)
  const bool collecting = lua_gc(L, LUA_GCISRUNNING) == 1;
  if (collecting) lua_gc(L, LUA_GCSTOP);
  Decoder d(L, bytes, top + 1, top + 2);
  const bool ok = d.Value(0) && d.AtEnd();
  if (collecting) lua_gc(L, LUA_GCRESTART);
  if (!ok) {
    *error = "corrupt state snapshot: " + d.error();
    lua_settop(L, top);
    return false;
  }
  lua_replace(L, top + 1);  // the value, over the refs table
  lua_settop(L, top + 1);
  return true;
}

}  // namespace lua_tasks
