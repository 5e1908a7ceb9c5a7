// SPDX-License-Identifier: MIT
// LuaHost helpers for the core tests: make one, run a chunk as JS would.
#pragma once

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "core/host/lua_host.hpp"

namespace lua_tasks {

// A host with these options; a failure to make one fails the test.
inline std::unique_ptr<LuaHost> CreateHost(const LuaHostOptions& o) {
  std::string error;
  auto host = LuaHost::Create(o, &error);
  EXPECT_TRUE(host) << error;
  return host;
}

// Runs `src` from the host's side, as a call from JS does; returns
// "ok:<first result as string>", "err:<message>" or "mem:<message>".
inline std::string RunLua(LuaHost* host, const std::string& src) {
  lua_State* L = host->main();
  const int base = lua_gettop(L);
  int status = host->Load(L, src, "=test");
  if (status == LUA_OK) {
    LuaHost::Entry entry(host, L);
    status = host->PCall(L, 0, 1);
  }
  std::string out;
  if (status == LUA_OK) {
    out = std::string("ok:") + luaL_tolstring(L, -1, nullptr);
  } else if (status == LUA_ERRRUN) {
    out = "err:" + host->last_message();
  } else if (status == LUA_ERRMEM) {
    out = "mem:" + host->MemoryErrorMessage();
  } else {
    out = std::string("err:") + lua_tostring(L, -1);
  }
  lua_settop(L, base);
  return out;
}

// The global table `log` of the state L, its entries joined with ",": what
// a test's Lua appended, in order.
inline std::string GlobalLog(lua_State* L) {
  lua_getglobal(L, "table");
  lua_getfield(L, -1, "concat");
  lua_getglobal(L, "log");
  lua_pushliteral(L, ",");
  lua_call(L, 2, 1);
  std::string s = lua_tostring(L, -1);
  lua_pop(L, 2);
  return s;
}

}  // namespace lua_tasks
