// SPDX-License-Identifier: MIT
// Tests for PgCopyRows: PostgreSQL's binary COPY rows, whole or split anywhere between chunks, and what does not read.
#include "core/store/pg_copy_rows.hpp"

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace lua_tasks {
namespace {

using Rows = std::vector<std::pair<std::string, std::string>>;

void U32(std::string* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>((v >> shift) & 0xff));
}
void I16(std::string* out, int16_t v) {
  out->push_back(static_cast<char>((static_cast<uint16_t>(v) >> 8) & 0xff));
  out->push_back(static_cast<char>(static_cast<uint16_t>(v) & 0xff));
}

// What the server sends for `rows` (a header extension of `extension` bytes).
std::string Copy(const Rows& rows, uint32_t extension = 0) {
  std::string out("PGCOPY\n\377\r\n\0", 11);
  U32(&out, 0);
  U32(&out, extension);
  out.append(extension, 'x');
  for (const auto& [k, v] : rows) {
    I16(&out, 2);
    U32(&out, static_cast<uint32_t>(k.size()));
    out += k;
    U32(&out, static_cast<uint32_t>(v.size()));
    out += v;
  }
  I16(&out, -1);
  return out;
}

// Feeds `data` in chunks of `size` bytes; the rows read, and whether it ended whole.
std::pair<Rows, bool> Read(const std::string& data, size_t size, std::string* error = nullptr) {
  PgCopyRows copy;
  Rows got;
  for (size_t at = 0; at < data.size(); at += size) {
    if (!copy.Feed(std::string_view(data).substr(at, size),
                   [&](std::string_view k, std::string_view v) { got.emplace_back(k, v); })) {
      if (error) *error = copy.error();
      return {got, false};
    }
  }
  const bool whole = copy.Finish();
  if (error) *error = copy.error();
  return {got, whole};
}

const Rows kRows = {{"task-1", std::string("\x00\x01\xff", 3)}, {"", ""}, {"task-2", std::string(300, 'v')}};

TEST(PgCopyRowsTest, ReadsEveryRowInOrder) {
  auto [got, whole] = Read(Copy(kRows), 1 << 16);
  EXPECT_TRUE(whole);
  EXPECT_EQ(got, kRows);
}

TEST(PgCopyRowsTest, ReadsRowsSplitAtEveryByte) {
  const std::string data = Copy(kRows, 5);
  for (size_t size = 1; size <= data.size(); ++size) {
    auto [got, whole] = Read(data, size);
    EXPECT_TRUE(whole) << "chunks of " << size;
    EXPECT_EQ(got, kRows) << "chunks of " << size;
  }
}

TEST(PgCopyRowsTest, AnEmptyCopyHasNoRows) {
  auto [got, whole] = Read(Copy({}), 3);
  EXPECT_TRUE(whole);
  EXPECT_TRUE(got.empty());
}

TEST(PgCopyRowsTest, CopyDataCutShortIsNotWhole) {
  const std::string data = Copy(kRows);
  std::string error;
  auto [got, whole] = Read(data.substr(0, data.size() - 2), 7, &error);  // no trailer
  EXPECT_FALSE(whole);
  EXPECT_EQ(got, kRows);
  EXPECT_EQ(error, "the PostgreSQL COPY data ended early (3 rows read, then 0 bytes of a row that did not end)");
  std::tie(got, whole) = Read(data.substr(0, data.size() - 10), 7, &error);  // inside the last row
  EXPECT_FALSE(whole);
  EXPECT_EQ(got.size(), 2u);
  std::tie(got, whole) = Read(data.substr(0, 6), 7, &error);
  EXPECT_FALSE(whole);
  EXPECT_EQ(error, "the PostgreSQL COPY data ended before its header did");
}

TEST(PgCopyRowsTest, WhatIsNotSuchACopyIsAnError) {
  std::string error;
  std::string text = "key\tvalue\n";
  EXPECT_FALSE(Read(text + std::string(20, ' '), 64, &error).second);
  EXPECT_EQ(error, "the PostgreSQL COPY data does not read: it does not begin with the binary COPY signature");

  std::string oids = Copy(kRows);
  oids[11 + 1] = 1;  // flags bit 16: OIDs
  EXPECT_FALSE(Read(oids, 64, &error).second);
  EXPECT_EQ(error, "the PostgreSQL COPY data does not read: its rows carry OIDs");

  std::string three = Copy({});
  three.resize(three.size() - 2);
  I16(&three, 3);
  EXPECT_FALSE(Read(three, 64, &error).second);
  EXPECT_EQ(error, "the PostgreSQL COPY data does not read: a row has 3 columns, not 2 (key, value)");

  std::string null_key = Copy({});
  null_key.resize(null_key.size() - 2);
  I16(&null_key, 2);
  U32(&null_key, UINT32_MAX);
  EXPECT_FALSE(Read(null_key, 64, &error).second);
  EXPECT_EQ(error, "the PostgreSQL COPY data does not read: a row's key is NULL");

  std::string null_value = Copy({});
  null_value.resize(null_value.size() - 2);
  I16(&null_value, 2);
  U32(&null_value, 1);
  null_value += "k";
  U32(&null_value, UINT32_MAX);
  EXPECT_FALSE(Read(null_value, 64, &error).second);
  EXPECT_EQ(error, "the PostgreSQL COPY data does not read: a row's value is NULL");

  EXPECT_FALSE(Read(Copy(kRows) + "x", 64, &error).second);
  EXPECT_EQ(error, "the PostgreSQL COPY data does not read: bytes follow its trailer");
}

TEST(PgCopyRowsTest, NothingIsReadAfterAnError) {
  PgCopyRows copy;
  int rows = 0;
  const auto count = [&](std::string_view, std::string_view) { ++rows; };
  EXPECT_FALSE(copy.Feed("not a copy at all, long enough", count));
  EXPECT_FALSE(copy.Feed(Copy(kRows), count));
  EXPECT_FALSE(copy.Finish());
  EXPECT_EQ(rows, 0);
}

}  // namespace
}  // namespace lua_tasks
