// SPDX-License-Identifier: MIT
// State decoder: a snapshot's bytes back to a Lua value, in slices (format:
// state_format.hpp).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "core/base/crc32c.hpp"
#include "core/codec/codec_slice.hpp"
#include "core/codec/state_codec.hpp"
#include "core/codec/state_format.hpp"
#include "core/host/lua_host.hpp"
#include "core/host/lua_ref.hpp"

namespace lua_tasks {

using namespace state_format;

namespace {

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

// The main thread of L's state: it lives as long as the state, where a job's
// own thread is gone once the job ends.
lua_State* MainThread(lua_State* L) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  lua_State* main = lua_tothread(L, -1);
  lua_pop(L, 1);
  return main;
}

}  // namespace

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
      case CodecStage::kStart:
        if (!Header()) return Failed();
        stage_ = CodecStage::kChecksum;
        [[fallthrough]];
      case CodecStage::kChecksum: {
        const CodecProgress r = Checksum();
        if (r == CodecProgress::kMore && slice_.halt() != CodecSlice::Halt::kNone) return Halted();
        if (r != CodecProgress::kDone) return r;
        if (!lua_checkstack(T_, 8 + StringCache::kSlots)) {
          return Fail("not enough memory for the Lua stack", CodecFailure::kNoRoom), Failed();
        }
        lua_newtable(T_);                         // kRefs
        lua_settop(T_, 1 + StringCache::kSlots);  // the string cache's slots, nil
        stage_ = CodecStage::kBody;
        if (Value() == Read::kError) return Failed();
        [[fallthrough]];
      }
      case CodecStage::kBody: {
        const CodecProgress r = Body();
        if (r == CodecProgress::kMore && slice_.halt() != CodecSlice::Halt::kNone) return Halted();
        if (r != CodecProgress::kDone) return r;
        if (p_ != end_) return Fail("bytes after the value"), Failed();
        stage_ = CodecStage::kDone;
        RestartCollector();
        return CodecProgress::kDone;
      }
      case CodecStage::kDone:
        return CodecProgress::kDone;
      case CodecStage::kFailed:
        return CodecProgress::kFailed;
    }
    return CodecProgress::kFailed;
  }

  CodecProgress progress() const { return ProgressOf(stage_); }

  void PushResult(lua_State* L) {
    lua_xmove(T_, L, 1);
    End();
  }
  const std::string& error() const { return error_; }
  CodecFailure failure() const { return failure_; }
  CodecSlice& slice() { return slice_; }

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

  // The frame (state_format::ReadFrame); sets end_ to the end of the stream
  // (before the checksum, if there is one).
  bool Header() {
    state_format::Frame frame;
    std::string why;
    if (!ReadFrame(bytes_, &frame, &why)) return Refuse(why);
    end_ = begin_ + frame.body_end;
    p_ = begin_ + kHeaderSize;
    crc_done_ = frame.checked ? 0 : Size();  // version 2 has nothing to check
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
    if (slice_.halt() == CodecSlice::Halt::kStop) {
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
    stage_ = CodecStage::kFailed;
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
  CodecSlice slice_;
  CodecStage stage_ = CodecStage::kStart;
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
