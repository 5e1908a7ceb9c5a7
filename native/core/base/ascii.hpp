// SPDX-License-Identifier: MIT
// ASCII letters without the C locale: names (yield instructions, cron's
// months and days) match the same whatever locale the process runs in.
#pragma once

#include <string_view>

namespace lua_tasks {

constexpr bool AsciiIsAlpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

constexpr char AsciiUpper(char c) {
  return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
}

// Equal but for the case of ASCII letters; other bytes must be equal.
constexpr bool EqualsIgnoringAsciiCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (AsciiUpper(a[i]) != AsciiUpper(b[i])) return false;
  }
  return true;
}

}  // namespace lua_tasks
