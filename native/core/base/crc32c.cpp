// SPDX-License-Identifier: MIT
// Crc32c: the Castagnoli CRC (iSCSI, RFC 3720) that checks every state snapshot.
#include "core/base/crc32c.hpp"

#include <algorithm>
#include <climits>
#include <cstddef>

#include <isa-l/crc.h>

namespace lua_tasks {

uint32_t Crc32c::Update(uint32_t crc, std::string_view bytes) noexcept {
  // ISA-L's crc32_iscsi neither inverts its seed nor its result: the running
  // value it carries is the complement of the standard CRC. Its length is an
  // int, so longer inputs go in pieces.
  uint32_t state = ~crc;
  // Its buffer parameter is not const, though it only reads.
  auto* p = reinterpret_cast<unsigned char*>(const_cast<char*>(bytes.data()));
  size_t left = bytes.size();
  while (left > 0) {
    const size_t n = std::min<size_t>(left, size_t{1} << 30);
    state = crc32_iscsi(p, static_cast<int>(n), state);
    p += n;
    left -= n;
  }
  return ~state;
}

}  // namespace lua_tasks
