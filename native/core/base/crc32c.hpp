// SPDX-License-Identifier: MIT
// Crc32c: the Castagnoli CRC (iSCSI, RFC 3720) that checks every state snapshot.
#pragma once

#include <cstdint>
#include <string_view>

namespace lua_tasks {

// The CRC-32C of a byte stream, fed in any number of pieces:
//   uint32_t crc = 0;  // the CRC of nothing
//   crc = Crc32c::Update(crc, first);
//   crc = Crc32c::Update(crc, second);  // == Crc32c::Update(0, first + second)
// The value is the standard one (reflected, initial and final value
// 0xFFFFFFFF): CRC-32C("123456789") = 0xE3069283. Computed by ISA-L
// (libisal), which uses the CPU's crc32 instruction where it has one.
struct Crc32c {
  static uint32_t Update(uint32_t crc, std::string_view bytes) noexcept;
};

}  // namespace lua_tasks
