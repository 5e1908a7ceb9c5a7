// SPDX-License-Identifier: MIT
#include "core/store/pg_copy_rows.hpp"

#include <cstring>

namespace lua_tasks {

namespace {

// The format's signature, then a 32-bit flags field and a 32-bit length of
// a header extension (PostgreSQL's COPY documentation, "Binary Format").
constexpr char kSignature[] = "PGCOPY\n\377\r\n";
constexpr size_t kSignatureBytes = 11;
constexpr uint32_t kFlagOids = 1u << 16;

uint32_t U32(const char* p) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

int16_t I16(const char* p) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return static_cast<int16_t>((uint16_t{b[0]} << 8) | uint16_t{b[1]});
}

}  // namespace

PgCopyRows::Step PgCopyRows::Bad(std::string why) {
  error_ = "the PostgreSQL COPY data does not read: " + std::move(why);
  carry_.clear();
  return Step::kBad;
}

PgCopyRows::Step PgCopyRows::Next(std::string_view data, size_t* pos, std::string_view* key, std::string_view* value) {
  const char* p = data.data() + *pos;
  const size_t left = data.size() - *pos;
  switch (stage_) {
    case Stage::kHeader: {
      if (left < kSignatureBytes + 8) return Step::kMore;
      if (std::memcmp(p, kSignature, kSignatureBytes) != 0)
        return Bad("it does not begin with the binary COPY signature");
      if ((U32(p + kSignatureBytes) & kFlagOids) != 0) return Bad("its rows carry OIDs");
      const uint32_t extension = U32(p + kSignatureBytes + 4);
      if (left < kSignatureBytes + 8 + size_t{extension}) return Step::kMore;
      *pos += kSignatureBytes + 8 + extension;
      stage_ = Stage::kRows;
      return Next(data, pos, key, value);
    }
    case Stage::kRows: {
      if (left < 2) return Step::kMore;
      const int16_t fields = I16(p);
      if (fields == -1) {
        *pos += 2;
        stage_ = Stage::kDone;
        return Next(data, pos, key, value);
      }
      if (fields != 2) return Bad("a row has " + std::to_string(fields) + " columns, not 2 (key, value)");
      if (left < 6) return Step::kMore;
      const uint32_t key_bytes = U32(p + 2);
      if (key_bytes == UINT32_MAX) return Bad("a row's key is NULL");
      if (left < 10 + size_t{key_bytes}) return Step::kMore;
      const uint32_t value_bytes = U32(p + 6 + key_bytes);
      if (value_bytes == UINT32_MAX) return Bad("a row's value is NULL");
      const size_t row_bytes = 10 + size_t{key_bytes} + value_bytes;
      if (left < row_bytes) return Step::kMore;
      *key = std::string_view(p + 6, key_bytes);
      *value = std::string_view(p + 10 + key_bytes, value_bytes);
      *pos += row_bytes;
      return Step::kRow;
    }
    case Stage::kDone:
      return left == 0 ? Step::kEnd : Bad("bytes follow its trailer");
  }
  return Step::kBad;
}

void PgCopyRows::Keep(std::string_view data, size_t pos) {
  if (!carry_.empty() && data.data() == carry_.data()) {
    carry_.erase(0, pos);
  } else {
    carry_.assign(data.substr(pos));
  }
}

bool PgCopyRows::Finish() {
  if (!error_.empty()) return false;
  if (stage_ != Stage::kDone || !carry_.empty()) {
    error_ = "the PostgreSQL COPY data ended early (" + std::to_string(rows_) + " rows read, then " +
             std::to_string(carry_.size()) + " bytes of a row that did not end)";
    if (stage_ == Stage::kHeader) error_ = "the PostgreSQL COPY data ended before its header did";
    return false;
  }
  return true;
}

}  // namespace lua_tasks
