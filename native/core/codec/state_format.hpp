// SPDX-License-Identifier: MIT
// State snapshot format: the frame, the value tags and their byte layout, one
// owner for the encoder, the decoder and the stores' frame check.
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
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace lua_tasks::state_format {

inline constexpr char kMagic[4] = {'L', 'T', 'S', 'T'};
inline constexpr uint8_t kVersion = 4;           // written
inline constexpr uint8_t kNoStringRefs = 3;      // still read: before string references
inline constexpr uint8_t kUncheckedVersion = 2;  // still read: 0.1.0 wrote it, without the checksum
inline constexpr size_t kHeaderSize = 5;         // the magic and the version
inline constexpr size_t kTrailerSize = 4;        // the CRC-32C

// The versions this build reads, and which of them end with a checksum.
inline bool ReadsVersion(uint8_t v) {
  return v == kVersion || v == kNoStringRefs || v == kUncheckedVersion;
}
inline bool HasChecksum(uint8_t v) {
  return v != kUncheckedVersion;
}

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
inline constexpr size_t kMinSharedString = 16;
// Table header after its tag: pair count and array hint, both u32.
inline constexpr size_t kTableHeader = 8;

static_assert(std::endian::native == std::endian::little || std::endian::native == std::endian::big);

inline void Store32(char* p, uint32_t v) {
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap32(v);
  std::memcpy(p, &v, 4);
}

inline void Store64(char* p, uint64_t v) {
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  std::memcpy(p, &v, 8);
}

inline uint32_t Load32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap32(v);
  return v;
}

inline uint64_t Load64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}

// Writes v as a varint at p (room for 10 bytes); returns the bytes written.
inline size_t StoreVarint(char* p, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    p[n++] = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  p[n++] = static_cast<char>(v);
  return n;
}

// Writes the header (kHeaderSize bytes) of the version written at p.
inline void StoreHeader(char* p) {
  std::memcpy(p, kMagic, sizeof kMagic);
  p[4] = static_cast<char>(kVersion);
}

// Where a snapshot's stream of values lies in its bytes.
struct Frame {
  size_t body_end;  // the stream ends here, before the checksum if there is one
  bool checked;     // a checksum of bytes [0, body_end) follows
};

// Reads the frame of a snapshot to decode: the magic, a version this build
// reads, the size within kMaxStateBytes, room for the checksum. False, with
// *why ("not a lua-tasks state snapshot (bad magic)", "state snapshot
// version 9 is not supported (...)", ...), for bytes it cannot be. The
// checksum itself is the decoder's to check, in slices.
bool ReadFrame(std::string_view bytes, Frame* frame, std::string* why);

}  // namespace lua_tasks::state_format
