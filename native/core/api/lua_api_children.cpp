// SPDX-License-Identifier: MIT
// Durable children: tasks.start from a durable task, and tasks.start_durable, start durable tasks exactly once.
//
// A task a durable task starts is durable with it (docs/durable.md#children):
// a restart finds the child again by its entry's name, so the child's
// function must be one a name reaches (a global, a loaded module's field);
// a closure or a coroutine has none and is refused. Exactly once, by order:
// a live parent journals the child's id (chosen before the start) and only
// then does the child's start record go into the same stream of writes,
// which a write takes whole and in order. So a write that holds the child's
// start holds the parent's record of it, and a crash leaves both or
// neither: a replay that finds the record starts nothing; one that does not
// find it finds no child either, and starts it.
#include "core/api/lua_api_durable.hpp"
#include "core/durable/replayer.hpp"
#include "core/scheduling/scheduler.hpp"

namespace lua_tasks {

namespace {

// Pushes the name by which a restart finds the function at `fn`: a global
// that holds it, else "mod.name" for a loaded module's field. False, with
// nothing pushed, if no such name holds it. Iterates raw (no metamethod runs).
bool PushEntryName(lua_State* L, int fn) {
  fn = lua_absindex(L, fn);
  luaL_checkstack(L, 8, "tasks.start");
  lua_pushglobaltable(L);
  lua_pushnil(L);
  while (lua_next(L, -2) != 0) {  // [G, k, v]
    if (lua_type(L, -2) == LUA_TSTRING && lua_rawequal(L, -1, fn)) {
      lua_pop(L, 1);
      lua_remove(L, -2);  // [k]
      return true;
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_pushnil(L);
  while (lua_next(L, -2) != 0) {  // [loaded, mod, m]
    if (lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TTABLE) {
      lua_pushnil(L);
      while (lua_next(L, -2) != 0) {  // [loaded, mod, m, k, v]
        if (lua_type(L, -2) == LUA_TSTRING && lua_rawequal(L, -1, fn)) {
          lua_pop(L, 1);
          lua_pushvalue(L, -3);
          lua_pushliteral(L, ".");
          lua_pushvalue(L, -3);
          lua_concat(L, 3);    // [loaded, mod, m, k, "mod.k"]
          lua_replace(L, -5);  // ["mod.k", mod, m, k]
          lua_pop(L, 3);
          return true;
        }
        lua_pop(L, 1);
      }
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return false;
}

enum class ChildStart { kStart, kReplay, kFailed };

// Encodes the child's start record (`entry`, the `nargs` values from
// index 3) into *child and, under a live parent's journal j, journals the
// child's id first. kReplay: j replays (its record holds the id); kFailed:
// a message is pushed. Never raises.
ChildStart PrepareChild(lua_State* L, Scheduler* s, Journal* j, const char* who, const char* entry, int nargs,
                        DurableStart* child) {
  LuaHost::HostSection section(s->host(), L);
  std::string error;
  CodecFailure failure;
  if (!EncodeStartRecord(L, entry, std::nullopt, 3, nargs, &child->start, &error,
                         s->persist_limits().Encoding(s->host()), &failure)) {
    PushStartError(L, s, who, error, failure);
    return ChildStart::kFailed;
  }
  if (j != nullptr && j->replaying()) return ChildStart::kReplay;
  std::string id = s->IdOf(s->next_key());
  if (j != nullptr) {
    lua_pushlstring(L, id.data(), id.size());
    if (!JournalValues(s, j, RecordKind::kValue, L, 1)) return ChildStart::kFailed;  // its message above the id
    lua_pop(L, 1);
  }
  child->id = std::move(id);
  child->entry = entry;
  return ChildStart::kStart;
}

}  // namespace

int StartChild(lua_State* L, Scheduler* s, const char* who) {
  const int nargs = lua_gettop(L) - 1;
  switch (lua_type(L, 1)) {
    case LUA_TSTRING:
      lua_pushvalue(L, 1);
      break;
    case LUA_TFUNCTION:
      if (PushEntryName(L, 1)) break;
      return luaL_error(L,
                        "%s: a durable task's child is durable too, and a restart finds its function again by name: "
                        "give a global function or a \"mod.fn\" name (this function is neither a global nor a loaded "
                        "module's field: a closure?)",
                        who);
    case LUA_TTHREAD:
      return luaL_error(L,
                        "%s: a durable task's child is durable too, and a coroutine cannot be (its frames do not "
                        "persist): give a global function or a \"mod.fn\" name",
                        who);
    default:
      return luaL_typeerror(L, 1, "function or entry name");
  }
  lua_insert(L, 1);  // [name, fn or name, args...]
  const char* entry = lua_tostring(L, 1);
  PushEntry(L, entry, who);
  if (lua_type(L, 2) == LUA_TFUNCTION && !lua_rawequal(L, -1, 2)) {
    return luaL_error(L, "%s: the name \"%s\" finds another function than the one given (a restart would run that one)",
                      who, entry);
  }
  lua_replace(L, 2);  // [name, fn, args...]
  Journal* j = RunningJournal(s);
  if (j != nullptr && !j->replaying() && s->replayer()->replay_only()) {
    PushReplayStop(s, j, L, RecordKindName(RecordKind::kValue));
    return lua_error(L);
  }
  ChildStart how;
  uint64_t key = 0;
  {
    // Gone before anything below raises.
    DurableStart child;
    how = PrepareChild(L, s, j, who, entry, nargs, &child);
    if (how == ChildStart::kStart) key = s->Start(L, nargs, false, nullptr, &child);
  }
  switch (how) {
    case ChildStart::kFailed:
      return lua_error(L);
    case ChildStart::kReplay: {
      lua_settop(L, 0);
      const int n = ReplayValues(s, j, RecordKind::kValue, std::nullopt, L);
      return n < 0 ? lua_error(L) : n;
    }
    case ChildStart::kStart:
      break;
  }
  if (key == 0) return luaL_error(L, "%s: the task could not be started (memory)", who);
  char id[Scheduler::kIdLength];
  lua_pushlstring(L, id, s->FormatId(key, id));
  return 1;
}

}  // namespace lua_tasks
