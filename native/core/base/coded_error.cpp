// SPDX-License-Identifier: MIT
// CodedError: a Lua error value that carries its code (docs/design.md#errors).
#include "core/base/coded_error.hpp"

namespace lua_tasks {

namespace {

// Its address is the registry key of the metatable: a light userdata key is
// looked up without allocating, so IsCodedError never raises.
constexpr char kMetaKey = 0;

struct CodedErrorBox {
  ErrorCode code;  // the message is the userdata's user value 1, kept alive by it
};

CodedErrorBox* ToCoded(lua_State* L, int idx) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) != LUA_TUSERDATA || !lua_checkstack(L, 2)) return nullptr;
  if (!lua_getmetatable(L, idx)) return nullptr;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kMetaKey);
  const bool ours = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return ours ? static_cast<CodedErrorBox*>(lua_touserdata(L, idx)) : nullptr;
}

// e.message, e.code; any other key reads nil.
int l_coded_index(lua_State* L) {
  const auto* box = static_cast<CodedErrorBox*>(lua_touserdata(L, 1));
  const char* key = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "";
  if (std::string_view(key) == "message") {
    lua_getiuservalue(L, 1, 1);
  } else if (std::string_view(key) == "code") {
    lua_pushstring(L, ErrorCodeName(box->code));
  } else {
    lua_pushnil(L);
  }
  return 1;
}

// Never raises: Lua's message handlers call __tostring on the way out of a
// failed call.
int l_coded_tostring(lua_State* L) {
  lua_getiuservalue(L, 1, 1);
  return 1;
}

// a .. b with a coded error on either side reads as it would with the
// string error it replaces.
int l_coded_concat(lua_State* L) {
  lua_settop(L, 2);
  for (int i = 1; i <= 2; ++i) {
    if (ToCoded(L, i) != nullptr) {
      lua_getiuservalue(L, i, 1);
      lua_replace(L, i);
    }
  }
  for (int i = 1; i <= 2; ++i) {
    const int t = lua_type(L, i);
    if (t != LUA_TSTRING && t != LUA_TNUMBER && luaL_getmetafield(L, i, "__concat") == LUA_TNIL) {
      return luaL_error(L, "attempt to concatenate a %s value", luaL_typename(L, i));  // Lua's words, at the caller
    }
    lua_settop(L, 2);
  }
  lua_concat(L, 2);  // the other side's own __concat, if it has one
  return 1;
}

}  // namespace

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kBadYield:
      return "ERR_BAD_YIELD";
    case ErrorCode::kCommitFailed:
      return "ERR_COMMIT_FAILED";
    case ErrorCode::kNondeterminism:
      return "ERR_NONDETERMINISM";
    case ErrorCode::kStoreLimit:
      return "ERR_STORE_LIMIT";
  }
  return "ERR_LUA_RUNTIME";
}

void RegisterCodedError(lua_State* L) {
  static const luaL_Reg kMeta[] = {
      {"__index", l_coded_index},
      {"__tostring", l_coded_tostring},
      {"__concat", l_coded_concat},
      {nullptr, nullptr},
  };
  lua_createtable(L, 0, 5);
  luaL_setfuncs(L, kMeta, 0);
  lua_pushliteral(L, "lua-tasks error");  // __name: in Lua's own messages
  lua_setfield(L, -2, "__name");
  lua_pushboolean(L, 0);  // getmetatable() answers false: Lua can neither see nor change it
  lua_setfield(L, -2, "__metatable");
  lua_rawsetp(L, LUA_REGISTRYINDEX, &kMetaKey);
}

namespace {

// The message on top of L becomes a coded error value in its place.
void BoxMessage(lua_State* L, ErrorCode code) {
  auto* box = static_cast<CodedErrorBox*>(lua_newuserdatauv(L, sizeof(CodedErrorBox), 1));
  box->code = code;
  lua_insert(L, -2);
  lua_setiuservalue(L, -2, 1);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kMetaKey);
  lua_setmetatable(L, -2);
}

}  // namespace

int RaiseCodedError(lua_State* L, ErrorCode code, const char* message) {
  luaL_where(L, 1);
  lua_pushstring(L, message);
  lua_concat(L, 2);
  BoxMessage(L, code);
  return lua_error(L);
}

void PushCodedError(lua_State* L, ErrorCode code, const char* message) {
  lua_pushstring(L, message);
  BoxMessage(L, code);
}

bool IsCodedError(lua_State* L, int idx, ErrorCode* code) {
  const CodedErrorBox* box = ToCoded(L, idx);
  if (box == nullptr) return false;
  *code = box->code;
  return true;
}

std::string_view CodedErrorMessage(lua_State* L, int idx) {
  lua_getiuservalue(L, idx, 1);
  size_t n = 0;
  // A string: no conversion, no allocation; still anchored by the error
  // value once popped.
  const char* s = lua_tolstring(L, -1, &n);
  lua_pop(L, 1);
  return std::string_view(s, n);
}

}  // namespace lua_tasks
