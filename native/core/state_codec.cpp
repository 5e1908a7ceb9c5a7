// SPDX-License-Identifier: MIT
// State codec: the persistent tasks.state table to bytes and back (DESIGN §8).
//
// Format, version 1 (all integers little-endian):
//   "LTST" 0x01                     magic and version
//   value                           the root
// value:
//   0x00 nil | 0x01 false | 0x02 true
//   0x03 int64 (8 bytes)            a Lua integer
//   0x04 float64 (8 bytes)          a Lua float: kept apart from integers
//   0x05 varint n, n bytes          a string (any bytes)
//   0x06 u32 n, varint a, n x (key value)
//                                   a table seen for the first time (n pairs,
//                                   a of them its array part: a size hint); it
//                                   takes the next table id (0, 1, 2, ...)
//   0x07 varint id                  a table seen before: shared references and
//                                   cycles come back as the same table
// The pair count is a fixed u32 so the encoder walks each table once and
// patches the count after. Decoding checks every count against the bytes left
// before allocating, so a corrupt or hostile file costs no more memory than
// its own size, and pauses Lua's collector: a snapshot is all live data.
#include "state_codec.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <vector>

namespace lua_tasks {

namespace {

constexpr char kMagic[4] = {'L', 'T', 'S', 'T'};
constexpr uint8_t kVersion = 1;

enum Tag : uint8_t { kNil, kFalse, kTrue, kInt, kFloat, kString, kTable, kRef, kTagCount };

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void Put64(std::string* out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out->append(b, 8);
}

bool IsIdentifier(const char* s, size_t n) {
  if (n == 0 || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (size_t i = 1; i < n; ++i) {
    if (!(std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) return false;
  }
  return true;
}

// Table identity -> id: open addressing over pointers, no allocation per table.
class PointerIds {
 public:
  PointerIds() : slots_(1024) {}
  // Returns the id of p, inserting `next` if p is new (then *inserted = true).
  uint32_t FindOrAdd(const void* p, uint32_t next, bool* inserted) {
    if ((count_ + 1) * 2 > slots_.size()) Grow();
    size_t i = Hash(p) & (slots_.size() - 1);
    while (slots_[i].key != nullptr) {
      if (slots_[i].key == p) {
        *inserted = false;
        return slots_[i].id;
      }
      i = (i + 1) & (slots_.size() - 1);
    }
    slots_[i] = {p, next};
    ++count_;
    *inserted = true;
    return next;
  }
  uint32_t size() const { return count_; }

 private:
  struct Slot {
    const void* key = nullptr;
    uint32_t id = 0;
  };
  static size_t Hash(const void* p) {
    uint64_t x = reinterpret_cast<uintptr_t>(p);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return static_cast<size_t>(x);
  }
  void Grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    count_ = 0;
    bool ignored;
    for (const Slot& s : old) {
      if (s.key != nullptr) FindOrAdd(s.key, s.id, &ignored);
    }
  }
  std::vector<Slot> slots_;
  uint32_t count_ = 0;
};

class Encoder {
 public:
  Encoder(lua_State* L, std::string* out, std::string* error, const char* root)
      : L_(L), out_(out), error_(error), root_(root) {}

  bool Value(int idx) {
    switch (lua_type(L_, idx)) {
      case LUA_TNIL:
        out_->push_back(kNil);
        return true;
      case LUA_TBOOLEAN:
        out_->push_back(lua_toboolean(L_, idx) ? kTrue : kFalse);
        return true;
      case LUA_TNUMBER:
        if (lua_isinteger(L_, idx)) {
          out_->push_back(kInt);
          Put64(out_, static_cast<uint64_t>(lua_tointeger(L_, idx)));
        } else {
          const double d = lua_tonumber(L_, idx);
          uint64_t bits;
          std::memcpy(&bits, &d, 8);
          out_->push_back(kFloat);
          Put64(out_, bits);
        }
        return true;
      case LUA_TSTRING: {
        size_t n;
        const char* s = lua_tolstring(L_, idx, &n);
        out_->push_back(kString);
        PutVarint(out_, n);
        out_->append(s, n);
        return Size();
      }
      case LUA_TTABLE:
        return Table(lua_absindex(L_, idx));
      default:
        return Fail(std::string("cannot persist a ") + luaL_typename(L_, idx));
    }
  }

 private:
  bool Table(int idx) {
    bool inserted;
    const uint32_t id = ids_.FindOrAdd(lua_topointer(L_, idx), ids_.size(), &inserted);
    if (!inserted) {
      out_->push_back(kRef);
      PutVarint(out_, id);
      return true;
    }
    if (static_cast<int>(keys_.size()) >= kMaxStateDepth) {
      return Fail("nested more than " + std::to_string(kMaxStateDepth) + " tables deep");
    }
    if (!lua_checkstack(L_, 4)) return Fail("nested too deep for the Lua stack");
    out_->push_back(kTable);
    const size_t count_at = out_->size();
    out_->append(4, '\0');  // the pair count, patched below
    PutVarint(out_, lua_rawlen(L_, idx));
    uint32_t count = 0;
    lua_pushnil(L_);
    while (lua_next(L_, idx) != 0) {
      keys_.push_back(lua_gettop(L_) - 1);  // the key's slot, for error paths
      const bool ok = KeyOk(-2) && Value(-2) && Value(-1);
      keys_.pop_back();
      lua_pop(L_, 1);
      if (!ok) {
        lua_pop(L_, 1);
        return false;
      }
      if (++count == UINT32_MAX) return Fail("table with too many entries");
    }
    for (int i = 0; i < 4; ++i) (*out_)[count_at + i] = static_cast<char>(count >> (8 * i));
    return true;
  }

  bool KeyOk(int idx) {
    const int t = lua_type(L_, idx);
    if (t == LUA_TFUNCTION || t == LUA_TUSERDATA || t == LUA_TTHREAD || t == LUA_TLIGHTUSERDATA) {
      keys_.pop_back();  // the path names the table holding the bad key
      const bool r = Fail(std::string("cannot persist a table key that is a ") + luaL_typename(L_, idx));
      keys_.push_back(0);
      return r;
    }
    return true;
  }

  bool Size() {
    if (out_->size() > kMaxStateBytes) return Fail("snapshot larger than 1 GiB");
    return true;
  }

  std::string Path() const {
    std::string p = root_;
    for (int k : keys_) {
      switch (lua_type(L_, k)) {
        case LUA_TSTRING: {
          size_t n;
          const char* s = lua_tolstring(L_, k, &n);
          if (IsIdentifier(s, n)) {
            p += '.';
            p.append(s, n);
          } else {
            p += "[\"";
            p.append(s, n > 40 ? 40 : n);
            p += "\"]";
          }
          break;
        }
        case LUA_TNUMBER: {
          char buf[32];
          if (lua_isinteger(L_, k)) {
            std::snprintf(buf, sizeof buf, "[%lld]", static_cast<long long>(lua_tointeger(L_, k)));
          } else {
            std::snprintf(buf, sizeof buf, "[%.14g]", lua_tonumber(L_, k));
          }
          p += buf;
          break;
        }
        case LUA_TBOOLEAN:
          p += lua_toboolean(L_, k) ? "[true]" : "[false]";
          break;
        default:
          p += std::string("[") + luaL_typename(L_, k) + "]";
      }
    }
    return p;
  }

  bool Fail(const std::string& what) {
    if (error_->empty()) *error_ = Path() + ": " + what;
    return false;
  }

  lua_State* L_;
  std::string* out_;
  std::string* error_;
  const char* root_;
  PointerIds ids_;                                 // table -> id, in order of first sight
  std::vector<int> keys_;                          // stack slots of the keys on the current path
};

class Decoder {
 public:
  Decoder(lua_State* L, std::string_view in, int refs) : L_(L), p_(in.data()), end_(in.data() + in.size()), refs_(refs) {}

  // Pushes one value, or returns false with error_ set (stack may hold partial values).
  bool Value(int depth) {
    if (p_ >= end_) return Fail("truncated");
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
        uint64_t v;
        if (!Get64(&v)) return false;
        if (tag == kInt) {
          lua_pushinteger(L_, static_cast<lua_Integer>(v));
        } else {
          double d;
          std::memcpy(&d, &v, 8);
          lua_pushnumber(L_, d);
        }
        return true;
      }
      case kString: {
        uint64_t n;
        if (!Varint(&n)) return false;
        if (n > static_cast<uint64_t>(end_ - p_)) return Fail("truncated string");
        lua_pushlstring(L_, p_, n);
        p_ += n;
        return true;
      }
      case kTable: {
        if (depth >= kMaxStateDepth) return Fail("nested too deep");
        if (!lua_checkstack(L_, 4)) return Fail("nested too deep for the Lua stack");
        if (end_ - p_ < 4) return Fail("truncated table");
        uint64_t count = 0;
        for (int i = 0; i < 4; ++i) count |= static_cast<uint64_t>(static_cast<uint8_t>(p_[i])) << (8 * i);
        p_ += 4;
        uint64_t narr;
        if (!Varint(&narr)) return false;
        if (count > static_cast<uint64_t>(end_ - p_) / 2 || narr > count) return Fail("table count past the end");
        lua_createtable(L_, static_cast<int>(narr), static_cast<int>(count - narr));
        lua_pushvalue(L_, -1);
        lua_rawseti(L_, refs_, static_cast<lua_Integer>(++tables_));  // registered first: cycles resolve
        for (uint64_t i = 0; i < count; ++i) {
          if (!Value(depth + 1) || !Value(depth + 1)) return false;
          if (lua_isnil(L_, -2) || (lua_type(L_, -2) == LUA_TNUMBER && std::isnan(lua_tonumber(L_, -2)))) {
            return Fail("invalid table key");
          }
          lua_rawset(L_, -3);
        }
        return true;
      }
      case kRef: {
        uint64_t id;
        if (!Varint(&id)) return false;
        if (id >= tables_) return Fail("reference to an unknown table");
        lua_rawgeti(L_, refs_, static_cast<lua_Integer>(id) + 1);
        return true;
      }
      default:
        return Fail("unknown value tag " + std::to_string(tag));
    }
  }

  bool AtEnd() const { return p_ == end_; }
  std::string error;

 private:
  bool Get64(uint64_t* v) {
    if (end_ - p_ < 8) return Fail("truncated number");
    *v = 0;
    for (int i = 0; i < 8; ++i) *v |= static_cast<uint64_t>(static_cast<uint8_t>(p_[i])) << (8 * i);
    p_ += 8;
    return true;
  }

  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) return Fail("truncated count");
      const uint8_t b = static_cast<uint8_t>(*p_++);
      *v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return Fail("malformed count");
  }

  bool Fail(const std::string& what) {
    if (error.empty()) error = what;
    return false;
  }

  lua_State* L_;
  const char* p_;
  const char* end_;
  int refs_;             // stack slot of the id -> table list
  uint64_t tables_ = 0;  // tables decoded so far
};

}  // namespace

bool EncodeState(lua_State* L, int idx, std::string* out, std::string* error, const char* root) {
  error->clear();
  out->clear();
  out->reserve(1 << 16);
  out->append(kMagic, 4);
  out->push_back(static_cast<char>(kVersion));
  const int top = lua_gettop(L);
  Encoder e(L, out, error, root);
  const bool ok = e.Value(lua_absindex(L, idx));
  lua_settop(L, top);
  if (!ok) out->clear();
  return ok;
}

bool DecodeState(lua_State* L, std::string_view bytes, std::string* error) {
  if (bytes.size() < 5 || std::memcmp(bytes.data(), kMagic, 4) != 0) {
    *error = "not a lua-tasks state snapshot (bad magic)";
    return false;
  }
  if (static_cast<uint8_t>(bytes[4]) != kVersion) {
    *error = "state snapshot version " + std::to_string(static_cast<uint8_t>(bytes[4])) +
             " is not supported (this build reads version " + std::to_string(kVersion) + ")";
    return false;
  }
  if (bytes.size() > kMaxStateBytes + 5) {
    *error = "state snapshot larger than 1 GiB";
    return false;
  }
  const int top = lua_gettop(L);
  if (!lua_checkstack(L, 8)) {
    *error = "Lua stack overflow";
    return false;
  }
  lua_newtable(L);  // id -> table
  const bool collecting = lua_gc(L, LUA_GCISRUNNING) != 0;
  if (collecting) lua_gc(L, LUA_GCSTOP);  // everything decoded is live: collecting is wasted work
  Decoder d(L, bytes.substr(5), top + 1);
  const bool ok = d.Value(0) && d.AtEnd();
  if (collecting) lua_gc(L, LUA_GCRESTART);
  if (!ok) {
    *error = "corrupt state snapshot: " + (d.error.empty() ? std::string("bytes after the end") : d.error);
    lua_settop(L, top);
    return false;
  }
  lua_remove(L, top + 1);
  return true;
}

}  // namespace lua_tasks
