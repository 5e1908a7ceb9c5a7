// SPDX-License-Identifier: MIT
// Runtime: the JS class over one Lua state (lib/index.js wraps it).
#include "runtime.hpp"

#include <string>

#include "convert.hpp"
#include "errors.hpp"
#include "js_ref.hpp"
#include "lua_value.hpp"

namespace lua_tasks {

namespace {

// print(...) -> the JS print function (upvalue 1), one string per call, the
// arguments joined by tabs as Lua's own print does. Pure Lua API: may raise.
int l_print(lua_State* L) {
  const int n = lua_gettop(L);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 1; i <= n; ++i) {
    if (i > 1) luaL_addchar(&b, '\t');
    luaL_tolstring(L, i, nullptr);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, -2);
  lua_call(L, 1, 0);
  return 0;
}

LibProfile ParseLibs(const Napi::Object& options) {
  LibProfile p;
  Napi::Value libs = options.Get("libs");
  if (libs.IsString()) {
    p.kind = libs.As<Napi::String>().Utf8Value() == "all" ? LibProfile::Kind::kAll : LibProfile::Kind::kSafe;
  } else if (libs.IsArray()) {
    p.kind = LibProfile::Kind::kList;
    Napi::Array a = libs.As<Napi::Array>();
    for (uint32_t i = 0; i < a.Length(); ++i) p.names.push_back(a.Get(i).As<Napi::String>().Utf8Value());
  }
  return p;
}

}  // namespace

Napi::Function Runtime::Init(Napi::Env env) {
  return DefineClass(env, "NativeRuntime",
                     {
                         InstanceMethod<&Runtime::JS_load>("load"),
                         InstanceMethod<&Runtime::JS_set>("set"),
                         InstanceMethod<&Runtime::JS_get>("get"),
                         InstanceMethod<&Runtime::JS_close>("close"),
                         InstanceMethod<&Runtime::JS_stats>("stats"),
                     });
}

Runtime::Runtime(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Runtime>(info) {
  Napi::Env env = info.Env();
  Napi::Object options = info[0].As<Napi::Object>();
  LuaHostOptions opts;
  opts.libs = ParseLibs(options);
  Napi::Value limit = options.Get("memoryLimit");
  if (limit.IsNumber()) opts.memory_limit = static_cast<size_t>(limit.As<Napi::Number>().DoubleValue());

  core_ = std::make_shared<RuntimeCore>(env);
  std::string error;
  core_->host = LuaHost::Create(opts, &error);
  if (!core_->host) ThrowError(env, "ERR_MEMORY_LIMIT", "Cannot create the Lua runtime: " + error);
  core_->host->embedder = core_.get();
  core_->AttachCleanupHook();

  lua_State* L = core_->host->main();
  LuaHost::HostSection section(core_->host.get(), L);
  RegisterJsRef(core_.get(), L);
  if (info[1].IsFunction()) {
    PushJsRef(core_.get(), L, info[1], true);
    lua_pushcclosure(L, l_print, 1);
    lua_setglobal(L, "print");
  }
}

RuntimeCore* Runtime::OpenCore(Napi::Env env) {
  if (core_->closed()) ThrowError(env, "ERR_RUNTIME_CLOSED", "This Lua runtime is closed.");
  return core_.get();
}

Napi::Value Runtime::JS_load(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  LuaHost* host = core->host.get();
  std::string source = info[0].As<Napi::String>().Utf8Value();
  std::string chunkname;
  if (info[1].IsString()) {
    chunkname.push_back('=');
    chunkname.append(info[1].As<Napi::String>().Utf8Value());
  } else {
    chunkname = source;  // Lua shows it as [string "first line..."]
  }
  lua_State* L = host->current();
  const int base = lua_gettop(L);
  if (!lua_checkstack(L, 4)) ThrowError(env, "ERR_LUA_RUNTIME", "Lua stack overflow.");
  int status;
  {
    LuaHost::Entry entry(host, L);  // parsing allocates: count it against the limit
    status = host->Load(L, source, chunkname.c_str());
  }
  if (status != LUA_OK) {
    Napi::Value err(env, LuaErrorToJs(core, L, status));
    lua_settop(L, base);
    throw Napi::Error(env, err);
  }
  return Napi::Value(env, CallLua(core, L, 0, true));
}

Napi::Value Runtime::JS_set(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  lua_State* L = core->host->current();
  const int base = lua_gettop(L);
  std::string name = info[0].As<Napi::String>().Utf8Value();
  LuaHost::HostSection section(core->host.get(), L);
  if (!lua_checkstack(L, 4)) ThrowError(env, "ERR_LUA_RUNTIME", "Lua stack overflow.");
  // Raw set: a metatable on _G must not run Lua code here.
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  lua_pushlstring(L, name.data(), name.size());
  try {
    PushJs(core, L, info[1]);
  } catch (...) {
    lua_settop(L, base);
    throw;
  }
  lua_rawset(L, -3);
  lua_settop(L, base);
  return env.Undefined();
}

Napi::Value Runtime::JS_get(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  lua_State* L = core->host->current();
  const int base = lua_gettop(L);
  std::string name = info[0].As<Napi::String>().Utf8Value();
  LuaHost::HostSection section(core->host.get(), L);
  if (!lua_checkstack(L, 4)) ThrowError(env, "ERR_LUA_RUNTIME", "Lua stack overflow.");
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  lua_pushlstring(L, name.data(), name.size());
  lua_rawget(L, -2);
  try {
    napi_value v = ToJs(core, L, -1);
    lua_settop(L, base);
    return Napi::Value(env, v);
  } catch (...) {
    lua_settop(L, base);
    throw;
  }
}

Napi::Value Runtime::JS_close(const Napi::CallbackInfo& info) {
  core_->Close();
  return info.Env().Undefined();
}

Napi::Value Runtime::JS_stats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  const MemoryBudget& m = core->host->memory();
  Napi::Object out = Napi::Object::New(env);
  out.Set("memoryUsed", Napi::Number::New(env, static_cast<double>(m.used)));
  out.Set("memoryPeak", Napi::Number::New(env, static_cast<double>(m.peak)));
  out.Set("memoryLimit", Napi::Number::New(env, static_cast<double>(m.limit)));
  return out;
}

}  // namespace lua_tasks
