// SPDX-License-Identifier: MIT
// Runtime's module loading: preload, isLoaded, and require from modulePaths files.
#include "addon/runtime/runtime.hpp"

#include <string>

#include "addon/errors.hpp"
#include "addon/values/convert.hpp"
#include "addon/values/js_ref.hpp"
#include "addon/values/lua_value.hpp"
#include "core/api/lua_api_require.hpp"
#include "lua/file_modules.lua.hpp"

namespace lua_tasks {

Napi::Value Runtime::JS_isLoaded(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  lua_State* L = core->host->current();
  const std::string name = info[0].As<Napi::String>().Utf8Value();
  LuaHost::HostSection section(core->host.get(), L);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_pushlstring(L, name.data(), name.size());  // all of it: c_str() stopped at a NUL
  const bool loaded = lua_rawget(L, -2) != LUA_TNIL;
  lua_pop(L, 2);
  return Napi::Boolean::New(env, loaded);
}

Napi::Value Runtime::JS_preload(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  lua_State* L = core->host->current();
  const int base = lua_gettop(L);
  const std::string name = info[0].As<Napi::String>().Utf8Value();
  if (info[1].IsString()) {
    const std::string source = info[1].As<Napi::String>().Utf8Value();
    // The chunk name is a C string: a NUL in the module name is shown as \0.
    std::string chunk(1, '=');
    for (const char c : name) {
      if (c == '\0') {
        chunk += "\\0";
      } else {
        chunk += c;
      }
    }
    int status;
    {
      LuaHost::Entry entry(core->host.get(), L);
      status = core->host->Load(L, source, chunk.c_str());
    }
    if (status != LUA_OK) {
      Napi::Value err(env, LuaErrorToJs(core, L, status));
      lua_settop(L, base);
      throw Napi::Error(env, err);
    }
    LuaHost::HostSection section(core->host.get(), L);
    PreloadModule(L, name);
  } else {
    LuaHost::HostSection section(core->host.get(), L);
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    try {
      const size_t before = core->MemoryUsed();
      PushJs(core, L, info[1]);
      core->CheckMemory(L, base, before);
    } catch (...) {
      lua_settop(L, base);
      throw;
    }
    lua_pushlstring(L, name.data(), name.size());  // the whole name: it may hold a NUL
    lua_insert(L, -2);
    lua_rawset(L, -3);
  }
  lua_settop(L, base);
  return env.Undefined();
}

Napi::Value Runtime::JS_modulePaths(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  lua_State* L = core->host->current();
  const int base = lua_gettop(L);
  {
    LuaHost::HostSection section(core->host.get(), L);
    if (luaL_loadbufferx(L, kFileModulesLua, sizeof(kFileModulesLua) - 1, kFileModulesLuaName, "t") != LUA_OK) {
      lua_settop(L, base);
      ThrowError(env, "ERR_LUA_RUNTIME", "cannot install modulePaths");
    }
    PushJsRef(core, L, info[0], true);
    PushJsRef(core, L, info[1], true);
    lua_getglobal(L, "load");
    lua_getglobal(L, "error");
    lua_getfield(L, LUA_REGISTRYINDEX, kPreloadRegistryKey);
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
    lua_pushboolean(L, info[2].ToBoolean());
  }
  CallLua(core, L, 7, false);
  return env.Undefined();
}

}  // namespace lua_tasks
