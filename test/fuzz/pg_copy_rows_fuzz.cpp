// SPDX-License-Identifier: MIT
// Fuzz target: PgCopyRows on arbitrary bytes must never crash, and must read the same rows and
// verdict however the bytes are split into chunks.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/store/pg_copy_rows.hpp"

namespace {

using Rows = std::vector<std::pair<std::string, std::string>>;

std::pair<Rows, bool> Read(std::string_view data, size_t chunk) {
  lua_tasks::PgCopyRows copy;
  Rows rows;
  for (size_t at = 0; at < data.size(); at += chunk) {
    if (!copy.Feed(data.substr(at, chunk), [&](std::string_view k, std::string_view v) { rows.emplace_back(k, v); }))
      return {rows, false};
  }
  return {rows, copy.Finish()};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t chunk = 1 + data[0] % 17;
  // A valid header most of the time, so the rows themselves are explored.
  std::string bytes("PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0", 19);
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 0x80) bytes.clear();
  bytes += rest;
  auto whole = Read(bytes, bytes.size() + 1);
  auto split = Read(bytes, chunk);
  // A row or an error is found at the same byte however the bytes came.
  if (whole != split) std::abort();
  return 0;
}
