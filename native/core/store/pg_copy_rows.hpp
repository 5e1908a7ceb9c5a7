// SPDX-License-Identifier: MIT
// PgCopyRows: rows of (text, bytea) in PostgreSQL's binary COPY format, decoded as its chunks arrive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace lua_tasks {

// A PostgreSQL store streams a space of a name as `COPY (SELECT key, value
// ...) TO STDOUT (FORMAT binary)`: the rows reach the native reader as the
// server sends them, with no JS value a row (docs/performance.md#durable-tasks).
// A row split between two chunks waits for the rest.
class PgCopyRows {
 public:
  // Hands each complete row of `chunk` to row(key, value) (views valid for
  // that call only); false, with error() saying why, if the bytes are not
  // such a COPY (then nothing more is read).
  template <typename Row>
  bool Feed(std::string_view chunk, Row&& row) {
    if (!error_.empty()) return false;
    std::string_view data = chunk;
    if (!carry_.empty()) data = carry_.append(chunk);
    size_t pos = 0;
    std::string_view key;
    std::string_view value;
    Step step;
    while ((step = Next(data, &pos, &key, &value)) == Step::kRow) {
      row(key, value);
      ++rows_;
    }
    if (step == Step::kBad) return false;
    Keep(data, pos);
    return true;
  }
  // True once the whole COPY was read (its trailer, nothing after); else
  // false and error() says what is missing.
  bool Finish();
  const std::string& error() const { return error_; }
  uint64_t rows() const { return rows_; }

 private:
  enum class Step { kRow, kMore, kEnd, kBad };
  Step Next(std::string_view data, size_t* pos, std::string_view* key, std::string_view* value);
  // The unread tail of `data` (a partial row) waits for the next chunk.
  void Keep(std::string_view data, size_t pos);
  Step Bad(std::string why);

  enum class Stage : uint8_t { kHeader, kRows, kDone };
  Stage stage_ = Stage::kHeader;
  std::string carry_;
  std::string error_;
  uint64_t rows_ = 0;
};

}  // namespace lua_tasks
