// SPDX-License-Identifier: MIT
// Helpers of the store tests: a temporary directory and checksummed value snapshots.
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "core/base/crc32c.hpp"

namespace lua_tasks {

// A fresh directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "store_test.XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(dir_); }
  std::string Db() const { return (dir_ / "lua-tasks.sqlite").string(); }

 private:
  std::filesystem::path dir_;
};

// A codec snapshot of the string `s` (format: state_format.hpp), checksum included.
inline std::string ValueSnapshot(const std::string& s) {
  std::string out = "LTST\x03";
  out += '\x05';
  out += static_cast<char>(s.size());  // a one-byte varint: the tests' strings are short
  out += s;
  const uint32_t crc = Crc32c::Update(0, out);
  for (int i = 0; i < 4; i++) out += static_cast<char>((crc >> (8 * i)) & 0xff);
  return out;
}

}  // namespace lua_tasks
