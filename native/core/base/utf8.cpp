// SPDX-License-Identifier: MIT
// UTF-8 validation: decides whether Lua bytes cross to JS as a string or a Buffer.
#include "core/base/utf8.hpp"

#include <cstdint>
#include <cstring>

namespace lua_tasks {

namespace {

// Number of leading ASCII bytes, eight at a time.
size_t AsciiPrefix(const unsigned char* s, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, s + i, 8);
    if (w & 0x8080808080808080ull) break;
  }
  while (i < n && s[i] < 0x80) ++i;
  return i;
}

}  // namespace

bool IsAscii(const char* p, size_t n) noexcept {
  return AsciiPrefix(reinterpret_cast<const unsigned char*>(p), n) == n;
}

bool IsValidUtf8(const char* p, size_t n) noexcept {
  const auto* s = reinterpret_cast<const unsigned char*>(p);
  size_t i = AsciiPrefix(s, n);
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // past U+10FFFF
    } else {
      return false;
    }
    if (n - i < len) return false;
    if (s[i + 1] < lo || s[i + 1] > hi) return false;
    for (size_t k = 2; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

}  // namespace lua_tasks
