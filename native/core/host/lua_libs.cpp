// SPDX-License-Identifier: MIT
// Library profiles: which standard libraries a runtime's Lua code can reach.
//
// The sandbox is an allow list installed once, when the state is created.
// 'safe' is for scripts the embedder did not write:
//   base       yes, but without dofile/loadfile (they read the file system;
//              modulePaths brings them back, confined), without warn (it
//              writes to the process's stderr behind the print option), with
//              load restricted to text chunks, and with setmetatable refusing
//              a metatable with __gc: Lua runs finalizers with hooks off, at
//              any allocation, so no CPU budget could stop one that loops
//   coroutine, string, table, math, utf8   yes: pure computation
//              (in every profile, the functions one call of which could run
//              for seconds are replaced by bounded ones: lua_api_bounded.hpp)
//   os         only time, clock, date, difftime: reading the clock is harmless;
//              execute/exit/getenv/remove/rename/tmpname/setlocale reach the host
//   io, debug, package   no: files, processes, and a way around every rule above
// In every profile, binary chunks are refused: a crafted bytecode string can
// corrupt the VM, and no Lua-side check can tell a crafted one from a good one.
#include "core/host/lua_libs.hpp"

#include <algorithm>

#include "core/api/lua_api_bounded.hpp"
#include "lua/text_only.lua.hpp"

namespace lua_tasks {

namespace {

struct Lib {
  const char* name;
  lua_CFunction open;
};

constexpr Lib kLibs[] = {
    {"_G", luaopen_base},
    {LUA_COLIBNAME, luaopen_coroutine},
    {LUA_STRLIBNAME, luaopen_string},
    {LUA_TABLIBNAME, luaopen_table},
    {LUA_MATHLIBNAME, luaopen_math},
    {LUA_UTF8LIBNAME, luaopen_utf8},
    {LUA_OSLIBNAME, luaopen_os},
    {LUA_IOLIBNAME, luaopen_io},
    {LUA_DBLIBNAME, luaopen_debug},
    {LUA_LOADLIBNAME, luaopen_package},
};

void Open(lua_State* L, std::string_view name) {
  for (const Lib& lib : kLibs) {
    if (name == lib.name || (name == "base" && std::string_view(lib.name) == "_G")) {
      luaL_requiref(L, lib.name, lib.open, 1);
      lua_pop(L, 1);
      return;
    }
  }
}

// Replaces os with a table of the clock-reading functions only.
// setmetatable(t, mt) as the base library has it, but refusing a metatable
// with a __gc field (the field Lua looks at, raw, to mark t for finalizing).
int SafeSetMetatable(lua_State* L) {
  const int mt = lua_type(L, 2);
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_argexpected(L, mt == LUA_TNIL || mt == LUA_TTABLE, 2, "nil or table");
  if (mt == LUA_TTABLE) {
    lua_pushliteral(L, "__gc");
    const bool gc = lua_rawget(L, 2) != LUA_TNIL;
    lua_pop(L, 1);
    if (gc) {
      return luaL_error(L,
                        "setmetatable: __gc finalizers are not available with libs 'safe' (Lua runs them at any "
                        "moment with hooks off, where no CPU budget can stop them); use a <close> variable, or "
                        "libs 'all'");
    }
  }
  if (luaL_getmetafield(L, 1, "__metatable") != LUA_TNIL) return luaL_error(L, "cannot change a protected metatable");
  lua_settop(L, 2);
  lua_setmetatable(L, 1);
  return 1;
}

void RestrictOs(lua_State* L) {
  static constexpr const char* kKeep[] = {"time", "clock", "date", "difftime"};
  luaL_requiref(L, LUA_OSLIBNAME, luaopen_os, 0);  // full os, not global
  lua_createtable(L, 0, 4);
  for (const char* k : kKeep) {
    lua_getfield(L, -2, k);
    lua_setfield(L, -2, k);
  }
  lua_setglobal(L, LUA_OSLIBNAME);
  lua_pop(L, 1);
  // Keep package.loaded consistent with the global.
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_getglobal(L, LUA_OSLIBNAME);
  lua_setfield(L, -2, LUA_OSLIBNAME);
  lua_pop(L, 1);
}

// Text-only wrappers over load/loadfile/dofile (lua/text_only.lua).
void InstallTextOnly(lua_State* L, bool keep_files) {
  if (luaL_loadbufferx(L, kTextOnlyLua, sizeof(kTextOnlyLua) - 1, kTextOnlyLuaName, "t") != LUA_OK) {
    lua_error(L);
  }
  lua_getglobal(L, "load");
  if (keep_files) {
    lua_getglobal(L, "loadfile");
  } else {
    lua_pushnil(L);
  }
  lua_getglobal(L, "select");
  lua_getglobal(L, "error");
  lua_call(L, 4, 0);
  if (!keep_files) {
    lua_pushnil(L);
    lua_setglobal(L, "loadfile");
    lua_pushnil(L);
    lua_setglobal(L, "dofile");
  }
}

}  // namespace

bool IsLibName(std::string_view name) {
  return std::find(std::begin(kLibNames), std::end(kLibNames), name) != std::end(kLibNames);
}

void OpenLibs(lua_State* L, const LibProfile& profile) {
  switch (profile.kind) {
    case LibProfile::Kind::kAll:
      luaL_openlibs(L);
      InstallBoundedFunctions(L);  // before the text-only load wraps load
      InstallTextOnly(L, true);
      break;
    case LibProfile::Kind::kSafe:
      for (const char* n : {"base", "coroutine", "string", "table", "math", "utf8"}) Open(L, n);
      RestrictOs(L);
      InstallBoundedFunctions(L);
      InstallTextOnly(L, false);
      lua_pushnil(L);
      lua_setglobal(L, "warn");
      lua_pushcfunction(L, SafeSetMetatable);
      lua_setglobal(L, "setmetatable");
      break;
    case LibProfile::Kind::kList: {
      Open(L, "base");
      Open(L, "coroutine");  // tasks are coroutines: the scheduler needs it
      for (const std::string& n : profile.names) Open(L, n);
      InstallBoundedFunctions(L);
      const bool files = std::find(profile.names.begin(), profile.names.end(), "io") != profile.names.end() ||
                         std::find(profile.names.begin(), profile.names.end(), "package") != profile.names.end();
      InstallTextOnly(L, files);
      break;
    }
  }
}

}  // namespace lua_tasks
