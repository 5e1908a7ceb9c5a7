// SPDX-License-Identifier: MIT
// State encoder: a Lua value to a snapshot's bytes, in slices (format:
// state_format.hpp).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "core/base/crc32c.hpp"
#include "core/base/grow_array.hpp"
#include "core/base/utf8.hpp"
#include "core/codec/codec_slice.hpp"
#include "core/codec/state_codec.hpp"
#include "core/codec/state_format.hpp"
#include "core/host/lua_host.hpp"
#include "core/host/lua_ref.hpp"

namespace lua_tasks {

using namespace state_format;

namespace {

// Longest key shown in an error path before it is cut with "...".
constexpr size_t kMaxPathKey = 40;
// The output's first capacity: a tasks.store.set encodes a record of a few
// hundred bytes, most often in one malloc.
constexpr size_t kFirstBytes = 512;

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

  // Returns the entry already held for e.key, or inserts e and returns null.
  // The entry returned is valid until the next call.
  const Entry* FindOrAdd(const Entry& e) {
    // Made at the first table: most values encoded (a journal record, a
    // tasks.store record) hold a few tables or none.
    if (slots_.size == 0) slots_ = Slots(kFirstSlots);
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
  static constexpr size_t kFirstSlots = 64;

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

}  // namespace

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
      case CodecStage::kStart: {
        w_.reserve(kFirstBytes);
        StoreHeader(w_.Room(kHeaderSize));
        w_.Commit(kHeaderSize);
        stage_ = CodecStage::kBody;
        if (!Value(1, lua_type(T_, 1))) return Failed();
        [[fallthrough]];
      }
      case CodecStage::kBody: {
        const CodecProgress r = Body();
        if (r == CodecProgress::kMore && slice_.halt() != CodecSlice::Halt::kNone) return Halted();
        if (r != CodecProgress::kDone) return r;
        stage_ = CodecStage::kChecksum;
        [[fallthrough]];
      }
      case CodecStage::kChecksum: {
        const CodecProgress r = Checksum();
        if (r == CodecProgress::kMore && slice_.halt() != CodecSlice::Halt::kNone) return Halted();
        return r;
      }
      case CodecStage::kDone:
        return CodecProgress::kDone;
      case CodecStage::kFailed:
        return CodecProgress::kFailed;
    }
    return CodecProgress::kFailed;
  }

  CodecProgress progress() const { return ProgressOf(stage_); }
  std::string_view bytes() const { return done_.view(); }
  SnapshotBytes TakeBytes() { return std::move(done_); }
  const std::string& error() const { return error_; }
  CodecFailure failure() const { return failure_; }
  CodecSlice& slice() { return slice_; }

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
            w_[seen->offset] = kSharedString;
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
      w_[seen->offset] = kSharedTable;
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
    char* p = &w_[f.header + 1];
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
      crc_ = Crc32c::Update(crc_, std::string_view(&w_[crc_done_], n));
      crc_done_ += n;
      if (crc_done_ < w_.size() && slice_.DueNow()) return CodecProgress::kMore;
    }
    Store32(w_.Room(kTrailerSize), crc_);
    w_.Commit(kTrailerSize);
    done_ = SnapshotBytes(std::move(w_));
    stage_ = CodecStage::kDone;
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
    stage_ = CodecStage::kFailed;
    w_ = GrowArray<char>();
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
  GrowArray<char> w_;          // the snapshot being written: a large one in pages of its own
  SnapshotBytes done_;         // the snapshot once written
  lua_State* T_ = nullptr;     // the job's thread: owned through thread_, null once ended
  LuaRef thread_;              // anchors T_ (and so every value on it) until the job ends
  TableIds ids_;               // every table begun so far
  TableIds string_ids_;        // every string of kMinSharedString bytes or more written so far
  std::vector<Frame> frames_;  // the open tables, root first
  CodecSlice slice_;
  CodecStage stage_ = CodecStage::kStart;
  uint32_t crc_ = 0;  // of the first crc_done_ bytes written
  size_t crc_done_ = 0;
  std::string error_;
  CodecFailure failure_ = CodecFailure::kNone;
};

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

}  // namespace lua_tasks
