// SPDX-License-Identifier: MIT
// Fuzz target: a journal record's payload (durable_journal.hpp's PushValues) on arbitrary bytes
// never crashes and leaves the stack as it was on failure; what it reads encodes again (under a
// size guard that may refuse it, kTooLarge) and reads back as the same number of values.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/durable/durable_journal.hpp"
#include "core/host/lua_host.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::unique_ptr<lua_tasks::LuaHost> host = [] {
    std::string error;
    return lua_tasks::LuaHost::Create(lua_tasks::LuaHostOptions{}, &error);
  }();
  lua_State* L = host->main();
  lua_tasks::LuaHost::HostSection section(host.get(), L);
  const int top = lua_gettop(L);
  const std::string payload(reinterpret_cast<const char*>(data), size);
  std::string error;
  const int n = lua_tasks::PushValues(L, payload, &error);
  if (n < 0) {
    if (error.empty() || lua_gettop(L) != top) __builtin_trap();
  } else {
    if (lua_gettop(L) != top + n) __builtin_trap();
    std::string again;
    lua_tasks::CodecFailure failure;
    const size_t max = 16 + size;
    if (lua_tasks::EncodeValues(L, n, &again, &error, lua_tasks::CodecGuard{.max_bytes = max}, &failure)) {
      if (again.size() > max) __builtin_trap();
      lua_settop(L, top);
      if (lua_tasks::PushValues(L, again, &error) != n) __builtin_trap();
    } else if (failure != lua_tasks::CodecFailure::kTooLarge && failure != lua_tasks::CodecFailure::kValue) {
      __builtin_trap();
    }
  }
  lua_settop(L, top);
  lua_gc(L, LUA_GCCOLLECT);
  return 0;
}
