// SPDX-License-Identifier: MIT
// Tests for Crc32c: the standard check value, known vectors, and pieces adding up.
#include "core/base/crc32c.hpp"

#include <string>

#include <gtest/gtest.h>

namespace lua_tasks {
namespace {

struct CrcRow {
  std::string bytes;
  uint32_t crc;
};

TEST(Crc32c, MatchesTheStandardValues) {
  const CrcRow rows[] = {
      {"", 0x00000000u},
      {"123456789", 0xE3069283u},  // the check value of the CRC-32C catalogue entry
      {"a", 0xC1D04330u},
      {std::string(32, '\0'), 0x8A9136AAu},    // RFC 3720 B.4: 32 bytes of zeros
      {std::string(32, '\xFF'), 0x62A8AB43u},  // RFC 3720 B.4: 32 bytes of ones
  };
  for (const CrcRow& row : rows) {
    SCOPED_TRACE(row.bytes.size());
    EXPECT_EQ(Crc32c::Update(0, row.bytes), row.crc);
  }
}

TEST(Crc32c, RFC3720IncrementingAndDecrementingBytes) {
  std::string up, down;
  for (int i = 0; i < 32; ++i) {
    up += static_cast<char>(i);
    down += static_cast<char>(31 - i);
  }
  EXPECT_EQ(Crc32c::Update(0, up), 0x46DD794Eu);
  EXPECT_EQ(Crc32c::Update(0, down), 0x113FDB5Cu);
}

TEST(Crc32c, PiecesAddUpToTheWhole) {
  std::string data;
  for (int i = 0; i < 10000; ++i) data += static_cast<char>(i * 7919 % 251);
  const uint32_t whole = Crc32c::Update(0, data);
  for (size_t cut : {size_t{0}, size_t{1}, size_t{63}, size_t{4096}, data.size() - 1, data.size()}) {
    SCOPED_TRACE(cut);
    const std::string_view all(data);
    EXPECT_EQ(Crc32c::Update(Crc32c::Update(0, all.substr(0, cut)), all.substr(cut)), whole);
  }
  uint32_t crc = 0;
  for (size_t i = 0; i < data.size(); i += 3) crc = Crc32c::Update(crc, std::string_view(data).substr(i, 3));
  EXPECT_EQ(crc, whole);
}

}  // namespace
}  // namespace lua_tasks
