// SPDX-License-Identifier: MIT
// coroutine.yield: reads a task's yield instruction where it is given and suspends the task.
//
// Design: a task's instruction is parsed where it is given. coroutine.yield
// is replaced by l_co_yield: on a task's own thread it validates the
// instruction (raising at the caller's line if it is bad), stores it in the
// task and yields no values; on any other coroutine (a detached part's
// thread too: scheduler_parts.cpp) it is Lua's plain yield.
// The life of one yield: parsed here (with yield_instruction.cpp), filed and
// woken by the scheduler (scheduler.cpp). A wait the tasks API starts inside
// a coroutine of the user's reaches the task's thread through the resume
// wrappers (lua_api_coroutine.cpp) and arrives here as the sentinel. The C
// functions check their arguments, then call the scheduler, then push
// results: nothing with a destructor lives in their frames when they raise.
#include "core/api/lua_api_yield.hpp"

#include <cstdio>
#include <string>

#include "core/base/coded_error.hpp"
#include "core/cron/cron_expr.hpp"
#include "core/scheduling/scheduler.hpp"

namespace lua_tasks {

namespace {

// The scheduler behind coroutine.yield (also its upvalue). Finalizers
// still run after it is gone (lua_close at runtime close): they get an
// error instead.
Scheduler* Sched(lua_State* L) {
  LuaHost::RaiseIfClosing(L);
  return static_cast<Scheduler*>(LuaHost::From(L)->scheduler);
}

// The wall-clock deadline of an UNTIL_NEXT yield: the next instant of the
// cron expression strictly after now. Returns false with err filled for a bad
// expression or zone, or one with no next time. All C++ state lives and dies
// in here, so the caller can raise afterwards.
bool CronDeadline(Scheduler* s, lua_State* L, const WaitRequest& req, int64_t* wall_ns, char* err,
                  size_t errlen) noexcept {
  try {
    std::string error;
    CronExpr expr;
    size_t n;
    const char* text = lua_tolstring(L, req.cron_index, &n);
    if (!ParseCron(std::string_view(text, n), &expr, &error)) {
      std::snprintf(err, errlen, "UNTIL_NEXT: %s", error.c_str());
      return false;
    }
    const date::time_zone* zone = s->default_zone();
    if (req.zone_index != 0) {
      const char* name = lua_tolstring(L, req.zone_index, &n);
      zone = FindZone(std::string_view(name, n), &error);
      if (zone == nullptr) {
        std::snprintf(err, errlen, "UNTIL_NEXT: %s", error.c_str());
        return false;
      }
    }
    const int64_t now_s = s->clock()->WallNs() / 1000000000;
    const std::optional<int64_t> next = CronNext(expr, now_s, zone);
    if (!next) {
      std::snprintf(err, errlen, "UNTIL_NEXT: cron expression \"%.80s\" has no next time", text);
      return false;
    }
    *wall_ns = *next * 1000000000;
    return true;
  } catch (const std::exception& e) {
    std::snprintf(err, errlen, "UNTIL_NEXT: %s", e.what());
    return false;
  }
}

// After a COMMIT: resumed with (true, nil) once written, or (false, err).
int k_commit(lua_State* L, int status, lua_KContext ctx) {
  const int top = lua_gettop(L);
  if (!lua_toboolean(L, top - 1)) return lua_error(L);  // err is on top
  lua_settop(L, top - 2);
  return lua_gettop(L);  // "COMMIT", extras...
}

// The instruction a yield's arguments name ("" for none: IMMEDIATE), or null
// if they name none: then it is a plain Lua yield.
const char* InstructionOf(lua_State* L) {
  if (lua_isnoneornil(L, 1)) return "";
  if (lua_type(L, 1) != LUA_TSTRING) return nullptr;
  const char* given = lua_tostring(L, 1);
  for (int i = 0; i < kKindCount; ++i) {
    const char* name = KindName(i);
    size_t k = 0;
    while (name[k] != '\0' && given[k] != '\0' &&
           (given[k] == name[k] || (given[k] >= 'a' && given[k] <= 'z' && given[k] - 'a' + 'A' == name[k])))
      ++k;
    if (name[k] == '\0' && given[k] == '\0') return name;
  }
  return nullptr;
}

int l_co_yield(lua_State* L) {
  Scheduler* s = Sched(L);
  Task* t = s->current();
  // Lua would say "attempt to yield from outside a coroutine": say what the
  // instruction needs instead, as tasks.sleep does (NeedTask, lua_api_tasks.cpp).
  if (!lua_isyieldable(L)) {
    if (const char* name = InstructionOf(L)) {
      const char* call = *name == '\0' ? "coroutine.yield()" : lua_pushfstring(L, "coroutine.yield(\"%s\")", name);
      if (t == nullptr) {
        return luaL_error(L,
                          "%s: not inside a task (yield instructions need one: start it with rt.start(fn) or "
                          "tasks.start(fn))",
                          call);
      }
      return luaL_error(L, "%s: cannot suspend the task here (inside a metamethod, a C function or a call from JS)",
                        call);
    }
  }
  if (t == nullptr || t->co != L) return lua_yield(L, lua_gettop(L));  // plain Lua semantics
  const int n = lua_gettop(L);
  // A detached part's own yields are plain: it goes back to its resumer
  // (Scheduler::ParkPlain); only an API wait passed up suspends it.
  const bool part = (t->family & Task::kPart) != 0;
  if (n == 0) {  // the common bare yield: IMMEDIATE, nothing to parse
    if (!part) t->Pend(WaitKind::kImmediate);
    return lua_yield(L, 0);
  }
  if (t->has_pending && lua_touserdata(L, 1) == s) return lua_yield(L, 0);  // an API wait passed up
  if (part) return lua_yield(L, n);
  WaitRequest req;
  char err[256];
  // Coded errors: a task that does not catch them fails with ERR_BAD_YIELD
  // or ERR_COMMIT_FAILED (docs/api.md, Errors); pcall sees the same text as ever.
  if (!ParseYieldInstruction(L, 1, n, *s->clock(), s->yield_names(), &req, err, sizeof err)) {
    return RaiseCodedError(L, ErrorCode::kBadYield, err);
  }
  if (req.kind == WaitKind::kUntilNext && !CronDeadline(s, L, req, &req.wall_ns, err, sizeof err)) {
    return RaiseCodedError(L, ErrorCode::kBadYield, err);
  }
  if (req.kind == WaitKind::kCommit) {
    if (!s->has_store()) {
      return RaiseCodedError(L, ErrorCode::kCommitFailed,
                             "COMMIT failed: this runtime has no store, so its state cannot be saved "
                             "(create it with Runtime.open({ name, store }))");
    }
    // The yield returns "COMMIT" and the extra values, which stay on this
    // frame's stack across the write (see k_commit).
    lua_pushliteral(L, "COMMIT");
    lua_replace(L, 1);
    t->Pend(req);
    return lua_yieldk(L, 0, 0, k_commit);
  }
  t->Pend(req);
  return lua_yield(L, 0);
}

}  // namespace

void RegisterYieldApi(lua_State* L, Scheduler* scheduler) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_getfield(L, -1, LUA_COLIBNAME);
  if (lua_istable(L, -1)) {
    lua_pushlightuserdata(L, scheduler);
    lua_pushcclosure(L, l_co_yield, 1);
    lua_setfield(L, -2, "yield");
  }
  lua_pop(L, 2);
}

}  // namespace lua_tasks
