// SPDX-License-Identifier: MIT
// Fuzz target: DecodeState on arbitrary bytes never crashes; what it decodes re-encodes and
// decodes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "lua_host.hpp"
#include "state_codec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::unique_ptr<lua_tasks::LuaHost> host = [] {
    std::string error;
    return lua_tasks::LuaHost::Create(lua_tasks::LuaHostOptions{}, &error);
  }();
  lua_State* L = host->main();
  lua_tasks::LuaHost::HostSection section(host.get(), L);
  const int top = lua_gettop(L);
  // Most inputs get a valid header, so the fuzzer spends its time on the
  // body; inputs that start with the magic keep theirs, to reach the header
  // checks too.
  std::string input;
  if (size < 4 || std::memcmp(data, "LTST", 4) != 0) input.assign("LTST\x02", 5);
  input.append(reinterpret_cast<const char*>(data), size);
  std::string error, bytes;
  if (lua_tasks::DecodeState(L, input, &error)) {
    if (lua_gettop(L) != top + 1) __builtin_trap();
    if (!lua_tasks::EncodeState(L, -1, &bytes, &error)) __builtin_trap();
    lua_settop(L, top);
    if (!lua_tasks::DecodeState(L, bytes, &error)) __builtin_trap();
  } else if (error.empty() || lua_gettop(L) != top) {
    __builtin_trap();
  }
  lua_settop(L, top);
  lua_gc(L, LUA_GCCOLLECT);
  return 0;
}
