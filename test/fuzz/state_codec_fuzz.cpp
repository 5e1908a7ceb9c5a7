// SPDX-License-Identifier: MIT
// Fuzz target: DecodeState on arbitrary bytes never crashes; what it decodes re-encodes and decodes.
#include <cstddef>
#include <cstdint>
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
  std::string error, bytes;
  std::string input("LTST\x01", 5);
  input.append(reinterpret_cast<const char*>(data), size);
  if (lua_tasks::DecodeState(L, input, &error)) {
    if (!lua_tasks::EncodeState(L, -1, &bytes, &error)) __builtin_trap();
    lua_settop(L, top);
    if (!lua_tasks::DecodeState(L, bytes, &error)) __builtin_trap();
  }
  lua_settop(L, top);
  lua_gc(L, LUA_GCCOLLECT);
  return 0;
}
