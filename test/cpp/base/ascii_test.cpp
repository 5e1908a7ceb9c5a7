// SPDX-License-Identifier: MIT
#include "core/base/ascii.hpp"

#include <clocale>

#include <gtest/gtest.h>

namespace lua_tasks {
namespace {

TEST(AsciiTest, FoldsOnlyAsciiLetters) {
  EXPECT_TRUE(EqualsIgnoringAsciiCase("immediate", "IMMEDIATE"));
  EXPECT_TRUE(EqualsIgnoringAsciiCase("Until_Next", "UNTIL_NEXT"));
  EXPECT_FALSE(EqualsIgnoringAsciiCase("FOR ", "FOR"));
  EXPECT_FALSE(EqualsIgnoringAsciiCase("f\xF6r", "F\xD6R"));  // Latin-1 bytes are not letters here
  EXPECT_EQ(AsciiUpper('\xE9'), '\xE9');
  EXPECT_TRUE(AsciiIsAlpha('q'));
  EXPECT_FALSE(AsciiIsAlpha('_'));
}

TEST(AsciiTest, TheLocaleDoesNotChangeAMatch) {
  // A single-byte locale where toupper('i') is not 'I' would break a
  // std::toupper match; the ASCII fold does not read the locale.
  const char* was = std::setlocale(LC_CTYPE, nullptr);
  std::string saved = was ? was : "C";
  std::setlocale(LC_CTYPE, "tr_TR.ISO-8859-9");  // present or not: the result must not differ
  EXPECT_TRUE(EqualsIgnoringAsciiCase("indefinitely", "INDEFINITELY"));
  std::setlocale(LC_CTYPE, saved.c_str());
}

}  // namespace
}  // namespace lua_tasks
