// SPDX-License-Identifier: MIT
// Tests for UTF-8 validation (which Lua strings cross to JS as strings).
#include "core/base/utf8.hpp"

#include <string>

#include <gtest/gtest.h>

namespace lua_tasks {
namespace {

struct Utf8Case {
  std::string bytes;
  bool valid;
};

TEST(Utf8, ClassifiesByteSequences) {
  const Utf8Case cases[] = {
      {"", true},
      {"plain ascii, longer than eight bytes", true},
      {"caf\xC3\xA9", true},
      {"\xE2\x82\xAC", true},       // euro sign
      {"\xF0\x9F\x98\x80", true},   // emoji
      {"\xF4\x8F\xBF\xBF", true},   // U+10FFFF
      {"\xC0\x80", false},          // overlong NUL
      {"\xE0\x80\xAF", false},      // overlong
      {"\xF0\x80\x80\xAF", false},  // overlong
      {"\xED\xA0\x80", false},      // surrogate
      {"\xF4\x90\x80\x80", false},  // past U+10FFFF
      {"\xFF", false},
      {"abc\xC3", false},           // truncated
      {"12345678\xE2\x82", false},  // truncated after the fast path
      {"\x80", false},              // lone continuation
      {std::string("nul\0inside", 10), true},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(IsValidUtf8(c.bytes.data(), c.bytes.size()), c.valid) << "bytes: " << c.bytes;
  }
}

TEST(Utf8, AsciiFastPathStopsAtTheFirstHighByte) {
  EXPECT_TRUE(IsAscii("0123456789abcdef", 16));
  EXPECT_FALSE(IsAscii("0123456789abcde\x80", 16));
  EXPECT_FALSE(IsAscii("\x80", 1));
}

}  // namespace
}  // namespace lua_tasks
