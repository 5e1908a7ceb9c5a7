// SPDX-License-Identifier: MIT
// The Lua API of durable tasks: tasks.step, tasks.durable, and the clock and random reads and JS calls they journal.
//
// Inside a durable task (docs/durable.md) every value that comes from
// outside the code is journaled, so that a replay hands back the same one:
// tasks.step(fn, ...) runs fn once and its results are the record; the
// wrapped os.time, os.clock, os.date and math.random record what they
// returned. Outside a durable task they are the functions they wrap.
#include "core/api/lua_api_durable.hpp"

#include "core/api/lua_api_tasks.hpp"

#include <string>

#include "core/api/lua_api_resolve.hpp"
#include "core/base/coded_error.hpp"
#include "core/durable/durable_record.hpp"
#include "core/durable/replayer.hpp"
#include "core/scheduling/scheduler.hpp"

namespace lua_tasks {

bool JournalValues(Scheduler* s, Journal* j, RecordKind kind, lua_State* L, int n,
                   std::optional<std::string_view> identity) {
  LuaHost::HostSection section(s->host(), L);
  std::string payload, error;
  bool limit = false;
  if (!s->replayer()->EncodeRecord(j, L, n, &payload, &error, &limit)) {
    if (limit) {
      PushCodedError(
          L, ErrorCode::kStoreLimit,
          ("durable task " + j->id() + ": " + RecordKindName(kind) + " cannot be journaled: " + error).c_str());
    } else {
      lua_pushfstring(L, "durable task %s: %s cannot be journaled: %s", j->id().c_str(), RecordKindName(kind),
                      error.c_str());
    }
    return false;
  }
  s->replayer()->AppendRecord(j, kind, payload, identity);
  return true;
}

int ReplayValues(Scheduler* s, Journal* j, RecordKind kind, std::optional<std::string_view> identity, lua_State* L) {
  LuaHost::HostSection section(s->host(), L);
  std::optional<std::string_view> was;
  const std::string_view values = SplitIdentity(j->Peek(), &was);
  // Either side without an identity (a record of an older version, an
  // unnamed step) is not checked: a name added or taken away replays.
  if (j->next_kind() != kind || (was && identity && *was != *identity)) {
    const std::string& m = s->replayer()->Diverge(j, DescribeIdentity(kind, identity).c_str());
    PushCodedError(L, ErrorCode::kNondeterminism, m.c_str());
    return -1;
  }
  j->Next();
  std::string error;
  const int n = PushValues(L, values, &error, Decoding(s->host()));
  if (!j->replaying()) j->EndReplay();
  if (n < 0) {
    lua_pushfstring(L, "durable task %s: a journal record does not read: %s", j->id().c_str(), error.c_str());
    return -2;
  }
  return n;
}

int ReplayCall(Scheduler* s, Journal* j, std::optional<std::string_view> name, lua_State* L) {
  if (j->replaying()) {
    // The outcome it had: the function is not called again.
    lua_settop(L, 0);
    const int n = ReplayValues(s, j, RecordKind::kCall, name, L);
    if (n < 0) return -1;
    if (!lua_toboolean(L, 1)) {
      lua_settop(L, 2);
      return -1;
    }
    lua_remove(L, 1);
    return n - 1;
  }
  if (s->replayer()->replay_only()) {  // past the journal's end: nothing is called
    PushReplayStop(s, j, L, DescribeIdentity(RecordKind::kCall, name));
    return -1;
  }
  return kCallLive;
}

int JournalCall(Scheduler* s, Journal* j, lua_State* L, int n, std::optional<std::string_view> name) {
  if (n < 0) {
    lua_pushboolean(L, 0);
    PushErrorMessage(L, -2);
    if (!JournalValues(s, j, RecordKind::kCall, L, 2, name)) return -1;
    lua_pop(L, 2);
    return -1;
  }
  lua_pushboolean(L, 1);
  lua_insert(L, -n - 1);
  if (!JournalValues(s, j, RecordKind::kCall, L, n + 1, name)) return -1;
  lua_remove(L, -n - 1);
  return n;
}

void AwaitCall(Journal* j, std::string_view name) noexcept {
  try {
    j->awaiting_call.emplace(name);
  } catch (...) {
    j->awaiting_call.reset();
  }
}

void PushReplayStop(Scheduler* s, Journal* j, lua_State* L, const std::string& now) {
  lua_pushstring(L, s->replayer()->StopReplay(j, now.c_str()).c_str());
}

Journal* RunningJournal(Scheduler* s) {
  Task* t = s->current();
  Journal* j = t == nullptr || !t->durable ? nullptr : s->replayer()->JournalOf(t);
  return j != nullptr && j->in_step == 0 ? j : nullptr;
}

void PushEntry(lua_State* L, const char* entry, const char* who) {
  if (lua_getglobal(L, entry) == LUA_TFUNCTION) return;
  lua_pop(L, 1);
  lua_getfield(L, LUA_REGISTRYINDEX, kResolveRegistryKey);
  lua_rawgeti(L, -1, 1);
  lua_remove(L, -2);
  lua_pushstring(L, entry);
  lua_call(L, 1, 1);
  if (!lua_isfunction(L, -1)) {
    luaL_error(L, "%s: \"%s\" is not a function (give a global name or a \"mod.fn\" path)", who, entry);
  }
}

void PushStartError(lua_State* L, Scheduler* s, const char* who, const std::string& error, CodecFailure failure) {
  if (failure == CodecFailure::kTooLarge) {
    PushCodedError(L, ErrorCode::kStoreLimit,
                   (std::string(who) + ": its arguments " + error + ": " +
                    LimitAdvice("maxValueBytes", s->persist_limits().value_bytes))
                       .c_str());
  } else {
    lua_pushfstring(L, "%s: its arguments must persist: %s", who, error.c_str());
  }
}

namespace {

Scheduler* Sched(lua_State* L) {
  LuaHost::RaiseIfClosing(L);
  return static_cast<Scheduler*>(lua_touserdata(L, lua_upvalueindex(1)));
}

// tasks.step([name,] fn, ...): fn's results. In a durable task fn runs once:
// a replay returns what it returned then (and fn cannot wait: a step is one
// stretch of code whose effects and record land in one batch). A named
// step's replay checks the name: an unnamed step has no identity that
// survives an edit of the lines above it (docs/durable.md#changing-code).
int l_step(lua_State* L) {
  Scheduler* s = Sched(L);
  // tasks.step(name, fn, ...): the name is the step's identity, checked on
  // replay; it stays at index 1 (alive) while fn runs.
  const int base = lua_type(L, 1) == LUA_TSTRING ? 1 : 0;
  std::optional<std::string_view> name;
  if (base == 1) {
    size_t len;
    const char* text = lua_tolstring(L, 1, &len);
    luaL_argcheck(L, len <= kMaxIdentity, 1, "a step's name is at most 255 bytes");
    name = std::string_view(text, len);
  }
  luaL_checktype(L, base + 1, LUA_TFUNCTION);
  Journal* j = RunningJournal(s);
  if (j != nullptr && j->replaying()) {
    lua_settop(L, base);
    const int n = ReplayValues(s, j, RecordKind::kStep, name, L);
    return n < 0 ? lua_error(L) : n;
  }
  if (j == nullptr) {
    lua_call(L, lua_gettop(L) - base - 1, LUA_MULTRET);
    return lua_gettop(L) - base;
  }
  if (s->replayer()->replay_only()) {
    PushReplayStop(s, j, L, DescribeIdentity(RecordKind::kStep, name));
    return lua_error(L);
  }
  // Protected, so that the step's mark comes off however it ends; its error
  // goes on as it was raised.
  ++j->in_step;
  const int status = lua_pcall(L, lua_gettop(L) - base - 1, LUA_MULTRET, 0);
  --j->in_step;
  if (status != LUA_OK) return lua_error(L);
  const int n = lua_gettop(L) - base;
  if (!JournalValues(s, j, RecordKind::kStep, L, n, name)) return lua_error(L);
  return n;
}

// Encodes the journal's entry, key and the `nargs` values on top of L as
// the start record of its next run (tasks.continue_as_new). False with the
// message pushed if one cannot persist.
bool PrepareRestart(Scheduler* s, Journal* j, lua_State* L, int nargs) {
  LuaHost::HostSection section(s->host(), L);
  const int first = lua_gettop(L) - nargs + 1;
  std::string error;
  CodecFailure failure;
  const bool ok = EncodeStartRecord(L, j->entry, j->key, first, nargs, &j->restart_start, &error,
                                    s->persist_limits().Encoding(s->host()), &failure);
  if (!ok) PushStartError(L, s, "tasks.continue_as_new", error, failure);
  if (ok && j->label) LabelStartRecord(&j->restart_start, *j->label);
  return ok;
}

// tasks.continue_as_new(...): ends this run of the running durable task and
// runs its entry again with these arguments, under the same id, with a
// journal that starts again: how a task that loops for ever keeps its
// journal bounded (docs/durable.md#continue-as-new). Does not return.
int l_continue_as_new(lua_State* L) {
  Scheduler* s = Sched(L);
  Task* t = s->current();
  Journal* j = RunningJournal(s);
  if (j == nullptr) {
    return luaL_error(L, "tasks.continue_as_new: only a durable task can continue as new (and not inside tasks.step)");
  }
  if (L != t->co) {
    return luaL_error(L, "tasks.continue_as_new: call it from the task's own code, not from a coroutine inside it");
  }
  if (j->replaying()) {
    lua_settop(L, 0);
    PushCodedError(L, ErrorCode::kNondeterminism, s->replayer()->Diverge(j, "tasks.continue_as_new").c_str());
    return lua_error(L);
  }
  if (s->replayer()->replay_only()) {
    PushReplayStop(s, j, L, "tasks.continue_as_new");
    return lua_error(L);
  }
  const int nargs = lua_gettop(L);
  if (!PrepareRestart(s, j, L, nargs)) return lua_error(L);
  PushEntry(L, j->entry.c_str(), "tasks.continue_as_new");
  lua_insert(L, 1);  // [fn, args...]
  lua_createtable(L, nargs + 1, 0);
  for (int i = 1; i <= nargs + 1; ++i) {
    lua_pushvalue(L, i);
    lua_rawseti(L, -2, i);
  }
  if (j->restart_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, j->restart_ref);
  j->restart_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  j->restart = true;
  t->Pend(WaitKind::kImmediate);
  return lua_yield(L, 0);
}

// tasks.start_durable(entry, ...) -> id: starts a durable task (as
// rt.spawn(entry, { durable: true, args }) does). `entry`: a global name or
// a "mod.fn" path, which a restart finds again.
int l_start_durable(lua_State* L) {
  Scheduler* s = Sched(L);
  luaL_checkstring(L, 1);
  if (s->replayer() == nullptr || !s->replayer()->ok()) {
    return luaL_error(L,
                      "tasks.start_durable: this runtime keeps no journals (open it with Runtime.open({ name, store }) "
                      "and a store that keeps keyed writes)");
  }
  return StartChild(L, s, "tasks.start_durable");
}

// Journals that the patch `name` is taken; false with an ERR_STORE_LIMIT
// value pushed when the record does not fit the journal's limits.
bool JournalPatch(Scheduler* s, Journal* j, lua_State* L, std::string_view name) {
  LuaHost::HostSection section(s->host(), L);
  std::string error;
  if (!s->replayer()->RecordFits(j, name.size(), &error)) {
    PushCodedError(L, ErrorCode::kStoreLimit, ("tasks.patched: durable task " + j->id() + ": " + error).c_str());
    return false;
  }
  s->replayer()->AppendRecord(j, RecordKind::kPatch, name);
  return true;
}

// tasks.patched(name) -> boolean: whether the running code may take the new
// path named `name` (docs/durable.md#changing-code). A live run takes it
// and journals that it did; a replay takes it only where its journal says
// the first run did, so a task started by older code goes on with the old
// path. Outside a durable task: true.
int l_patched(lua_State* L) {
  Scheduler* s = Sched(L);
  size_t n;
  const char* name = luaL_checklstring(L, 1, &n);
  Journal* j = RunningJournal(s);
  if (j == nullptr) {
    lua_pushboolean(L, 1);
    return 1;
  }
  if (j->replaying()) {
    bool taken = false;
    if (j->next_kind() == RecordKind::kPatch && j->Peek() == std::string_view(name, n)) {
      j->Next();
      if (!j->replaying()) j->EndReplay();
      taken = true;
    }
    lua_pushboolean(L, taken);
    return 1;
  }
  if (s->replayer()->replay_only()) {
    PushReplayStop(s, j, L, "tasks.patched");
    return lua_error(L);
  }
  if (!JournalPatch(s, j, L, std::string_view(name, n))) return lua_error(L);
  lua_pushboolean(L, 1);
  return 1;
}

// tasks.durable(): whether the running task is durable.
int l_durable(lua_State* L) {
  Scheduler* s = Sched(L);
  Task* t = s->current();
  lua_pushboolean(L, t != nullptr && t->durable);
  return 1;
}

// A clock or random read, or a call of the tasks API on other tasks. The
// wrapper has the wrapped function's K upvalues first (math.random's state;
// the tasks API's scheduler), then the scheduler, then the wrapped function,
// and calls the wrapped C function in its own frame: its argument errors
// name it as before ("bad argument #1 to 'tasks.send'").
template <int K>
int l_journaled_read(lua_State* L) {
  LuaHost::RaiseIfClosing(L);
  auto* s = static_cast<Scheduler*>(lua_touserdata(L, lua_upvalueindex(K + 1)));
  return JournaledCall(L, s, lua_tocfunction(L, lua_upvalueindex(K + 2)));
}

// tasks.cancel, send and resume: as l_journaled_read<1>, but a live call
// that names a task being restored waits for it first (AwaitRestore), then
// is made, and journaled, as if it had found the task live. Upvalues: the
// wrapped function's scheduler, the scheduler, the wrapped function, its name.
int l_journaled_task_call(lua_State* L);
int k_journaled_task_call(lua_State* L, int, lua_KContext) {
  return l_journaled_task_call(L);
}
int l_journaled_task_call(lua_State* L) {
  LuaHost::RaiseIfClosing(L);
  auto* s = static_cast<Scheduler*>(lua_touserdata(L, lua_upvalueindex(2)));
  if (Journal* j = RunningJournal(s); j == nullptr || !j->replaying()) {
    if (AwaitRestore(L, s, lua_tostring(L, lua_upvalueindex(4)), k_journaled_task_call) >= 0) return 0;  // (yields)
  }
  return JournaledCall(L, s, lua_tocfunction(L, lua_upvalueindex(3)));
}

// Wraps table[name] (the table on top of L) if it is a C function of at
// most one upvalue.
void WrapRead(lua_State* L, Scheduler* scheduler, const char* name, bool names_task = false) {
  if (lua_getfield(L, -1, name) != LUA_TFUNCTION || !lua_iscfunction(L, -1)) {
    lua_pop(L, 1);
    return;
  }
  const int fn = lua_gettop(L);
  int k = 0;
  while (lua_getupvalue(L, fn, k + 1) != nullptr) ++k;  // its upvalues, in order
  if (k > 1) {
    lua_settop(L, fn - 1);
    return;
  }
  lua_pushlightuserdata(L, scheduler);
  lua_pushvalue(L, fn);
  if (names_task && k == 1) {
    lua_pushfstring(L, "tasks.%s", name);
    lua_pushcclosure(L, l_journaled_task_call, 4);
  } else {
    lua_pushcclosure(L, k == 0 ? l_journaled_read<0> : l_journaled_read<1>, k + 2);
  }
  lua_setfield(L, fn - 1, name);
  lua_settop(L, fn - 1);
}

}  // namespace

int JournaledCall(lua_State* L, Scheduler* s, lua_CFunction wrapped) {
  Journal* j = RunningJournal(s);
  if (j == nullptr) return wrapped(L);
  if (j->replaying()) {
    lua_settop(L, 0);
    const int n = ReplayValues(s, j, RecordKind::kValue, std::nullopt, L);
    return n < 0 ? lua_error(L) : n;
  }
  if (s->replayer()->replay_only()) {
    PushReplayStop(s, j, L, RecordKindName(RecordKind::kValue));
    return lua_error(L);
  }
  const int n = wrapped(L);
  if (!JournalValues(s, j, RecordKind::kValue, L, n)) return lua_error(L);
  return n;
}

void RegisterDurableApi(lua_State* L, Scheduler* scheduler) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  if (lua_getfield(L, -1, "tasks") == LUA_TTABLE) {
    static const luaL_Reg kFuncs[] = {
        {"step", l_step},
        {"durable", l_durable},
        {"start_durable", l_start_durable},
        {"patched", l_patched},
        {"continue_as_new", l_continue_as_new},
        {nullptr, nullptr},
    };
    lua_pushlightuserdata(L, scheduler);
    luaL_setfuncs(L, kFuncs, 1);
    // What a durable task learns of other tasks, or does to them, happens
    // once: a replay hands back the answer (a started task's id is
    // StartChild's own record).
    WrapRead(L, scheduler, "status");
    for (const char* name : {"cancel", "send", "resume"}) WrapRead(L, scheduler, name, true);
  }
  lua_pop(L, 1);
  // The global os and math are package.loaded's (lua_libs.cpp keeps them so).
  if (lua_getfield(L, -1, LUA_OSLIBNAME) == LUA_TTABLE) {
    for (const char* name : {"time", "clock", "date"}) WrapRead(L, scheduler, name);
  }
  lua_pop(L, 1);
  if (lua_getfield(L, -1, LUA_MATHLIBNAME) == LUA_TTABLE) WrapRead(L, scheduler, "random");
  lua_pop(L, 2);
}

}  // namespace lua_tasks
