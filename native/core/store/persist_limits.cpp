// SPDX-License-Identifier: MIT
// PersistLimits: the bytes a script may make its runtime encode, hold for writing and persist.
#include "core/store/persist_limits.hpp"

#include "core/host/lua_host.hpp"

namespace lua_tasks {

CodecGuard Decoding(LuaHost* host) {
  CodecGuard g;
  g.memory = &host->memory();
  g.stop = host;
  return g;
}

std::string ByteCount(size_t n) {
  if (n >= (size_t{1} << 20) && n % (size_t{1} << 20) == 0) return std::to_string(n >> 20) + " MiB";
  if (n >= (size_t{1} << 10) && n % (size_t{1} << 10) == 0) return std::to_string(n >> 10) + " KiB";
  return std::to_string(n) + " bytes";
}

std::string LimitAdvice(std::string_view option, size_t limit) {
  return "the " + std::string(option) + " limit is " + ByteCount(limit) + " (a runtime option: raise it there)";
}

}  // namespace lua_tasks
