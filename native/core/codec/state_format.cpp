// SPDX-License-Identifier: MIT
// State snapshot format: the frame checks (state_format.hpp).
#include "core/codec/state_format.hpp"

#include <algorithm>

#include "core/base/crc32c.hpp"
#include "core/codec/state_codec.hpp"

namespace lua_tasks {

using namespace state_format;

bool state_format::ReadFrame(std::string_view bytes, Frame* frame, std::string* why) {
  const size_t n = bytes.size();
  if (n == 0 || std::memcmp(bytes.data(), kMagic, std::min(n, sizeof kMagic)) != 0) {
    *why = "not a lua-tasks state snapshot (bad magic)";
    return false;
  }
  if (n < kHeaderSize) {
    *why = "corrupt state snapshot: truncated header";
    return false;
  }
  const uint8_t version = static_cast<uint8_t>(bytes[4]);
  if (!ReadsVersion(version)) {
    *why = "state snapshot version " + std::to_string(version) + " is not supported (this build reads versions " +
           std::to_string(kUncheckedVersion) + " to " + std::to_string(kVersion) + ")";
    return false;
  }
  if (n > kMaxStateBytes) {
    *why = "state snapshot larger than " + std::to_string(kMaxStateBytes >> 20) + " MiB";
    return false;
  }
  frame->checked = HasChecksum(version);
  frame->body_end = n;
  if (frame->checked) {
    if (n < kHeaderSize + kTrailerSize) {
      *why = "corrupt state snapshot: truncated checksum";
      return false;
    }
    frame->body_end -= kTrailerSize;
  }
  return true;
}

bool SnapshotFrameIntact(std::string_view bytes, std::string* why) {
  if (bytes.size() < kHeaderSize + kTrailerSize || bytes.substr(0, sizeof kMagic) != std::string_view(kMagic, 4)) {
    *why = "not a lua-tasks value snapshot";
    return false;
  }
  if (const uint8_t v = static_cast<uint8_t>(bytes[4]); !ReadsVersion(v) || !HasChecksum(v)) {
    *why = "value snapshot version " + std::to_string(v) + " is not supported";
    return false;
  }
  const size_t body = bytes.size() - kTrailerSize;
  if (Crc32c::Update(0, bytes.substr(0, body)) != Load32(bytes.data() + body)) {
    *why = "checksum mismatch";
    return false;
  }
  return true;
}

}  // namespace lua_tasks
