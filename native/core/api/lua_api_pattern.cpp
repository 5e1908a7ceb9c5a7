// SPDX-License-Identifier: MIT
// string.find, match, gmatch and gsub over PatternMatcher: the stock functions' behaviour, but stoppable.
//
// Each function checks its arguments in the order Lua 5.4.4's does (so a bad
// call gets the same "bad argument" error), runs the match, then pushes the
// results or raises. A PatternMatcher is trivially destructible and
// luaL_Buffer is plain data, so nothing here has a destructor to skip when a
// raise (ours, a replacement function's, a __index's) longjmps out. A match
// the stop callback ends raises what PatternStop::raise raises.
#include "core/api/lua_api_pattern.hpp"

#include <cstring>

#include "core/api/lua_pattern.hpp"
#include "core/host/lua_host.hpp"

namespace lua_tasks {

namespace {

using Status = PatternMatcher::Status;

constexpr size_t kNoMatchYet = static_cast<size_t>(-1);

// gmatch's iterator state (a userdata upvalue). Offsets into the subject.
struct GmatchState {
  size_t pos;   // where the next search starts (past the subject: none)
  size_t last;  // end of the last match, or kNoMatchYet
};

const PatternStop* StopAt(lua_State* L, int upvalue) {
  return static_cast<const PatternStop*>(lua_touserdata(L, lua_upvalueindex(upvalue)));
}

// A 1-based position argument (negative: from the end; out of range below:
// the start) as a 0-based offset, which may lie past the end.
size_t StartOffset(lua_Integer pos, size_t len) {
  if (pos > 0) return static_cast<size_t>(pos) - 1;
  if (pos == 0 || pos < -static_cast<lua_Integer>(len)) return 0;
  return len - static_cast<size_t>(-pos);
}

// Raises for a matcher that ended with kError or kStopped.
int RaiseHalt(lua_State* L, const PatternMatcher& m, Status status, const PatternStop* stop) {
  using Error = PatternMatcher::Error;
  if (status == Status::kStopped) return stop->raise(stop->ctx, L);
  switch (m.error()) {
    case Error::kEndsWithEscape:
      return luaL_error(L, "malformed pattern (ends with '%%')");
    case Error::kMissingBracket:
      return luaL_error(L, "malformed pattern (missing ']')");
    case Error::kFrontierBracket:
      return luaL_error(L, "missing '[' after '%%f' in pattern");
    case Error::kBalanceArgs:
      return luaL_error(L, "malformed pattern (missing arguments to '%%b')");
    case Error::kCaptureIndex:
      return luaL_error(L, "invalid capture index %%%d", m.error_index());
    case Error::kPatternCapture:
      return luaL_error(L, "invalid pattern capture");
    case Error::kTooManyCaptures:
      return luaL_error(L, "too many captures");
    case Error::kTooComplex:
      return luaL_error(L, "pattern too complex");
    case Error::kNone:
      break;
  }
  return luaL_error(L, "pattern match failed");
}

// Capture i of the current match: its text in *text and its length, or
// PatternMatcher::kPosition. With no captures at all, "capture 0" is the
// whole match. Raises for a capture that does not exist or is still open.
ptrdiff_t CaptureText(lua_State* L, const PatternMatcher& m, int i, const char** text) {
  if (i >= m.captures()) {
    if (i != 0) luaL_error(L, "invalid capture index %%%d", i + 1);
    *text = m.start();
    return m.end() - m.start();
  }
  const PatternMatcher::Capture& c = m.capture(i);
  if (c.len == PatternMatcher::kOpen) luaL_error(L, "unfinished capture");
  *text = c.start;
  return c.len;
}

// Stack: [...] -> [..., capture i] (a position capture as an integer).
void PushCapture(lua_State* L, const PatternMatcher& m, int i) {
  const char* text;
  const ptrdiff_t len = CaptureText(L, m, i, &text);
  if (len == PatternMatcher::kPosition) {
    lua_pushinteger(L, text - m.subject() + 1);
  } else {
    lua_pushlstring(L, text, static_cast<size_t>(len));
  }
}

// Pushes every capture, or the whole match when there are none and `whole`.
// Returns how many it pushed.
int PushCaptures(lua_State* L, const PatternMatcher& m, bool whole) {
  const int n = m.captures() == 0 && whole ? 1 : m.captures();
  luaL_checkstack(L, n, "too many captures");
  for (int i = 0; i < n; ++i) PushCapture(L, m, i);
  return n;
}

// find and match. Stack: the caller's arguments -> results.
int FindOrMatch(lua_State* L, bool find) {
  size_t ls, lp;
  const char* s = luaL_checklstring(L, 1, &ls);
  const char* p = luaL_checklstring(L, 2, &lp);
  const size_t init = StartOffset(luaL_optinteger(L, 3, 1), ls);
  if (init > ls) {
    luaL_pushfail(L);
    return 1;
  }
  const PatternStop* stop = StopAt(L, 1);
  if (find && (lua_toboolean(L, 4) || !HasPatternSpecials(p, lp))) {
    const ptrdiff_t at = FindPlain(s, ls, init, p, lp, stop->should_stop, stop->ctx);
    if (at == kFindStopped) return stop->raise(stop->ctx, L);
    if (at < 0) {
      luaL_pushfail(L);
      return 1;
    }
    lua_pushinteger(L, at + 1);
    lua_pushinteger(L, at + static_cast<lua_Integer>(lp));
    return 2;
  }
  const size_t anchored = lp > 0 && p[0] == '^' ? 1 : 0;
  PatternMatcher m(s, ls, p + anchored, lp - anchored, stop->should_stop, stop->ctx);
  const Status status = m.Search(init, anchored != 0, nullptr);
  if (status == Status::kNoMatch) {
    luaL_pushfail(L);
    return 1;
  }
  if (status != Status::kMatch) return RaiseHalt(L, m, status, stop);
  if (!find) return PushCaptures(L, m, true);
  lua_pushinteger(L, m.start() - s + 1);
  lua_pushinteger(L, m.end() - s);
  return 2 + PushCaptures(L, m, false);
}

int l_pattern_find(lua_State* L) {
  return FindOrMatch(L, true);
}
int l_pattern_match(lua_State* L) {
  return FindOrMatch(L, false);
}

// Upvalues: subject, pattern, GmatchState, PatternStop. '^' is no anchor here.
int l_pattern_gmatch_next(lua_State* L) {
  size_t ls, lp;
  const char* s = lua_tolstring(L, lua_upvalueindex(1), &ls);
  const char* p = lua_tolstring(L, lua_upvalueindex(2), &lp);
  auto* st = static_cast<GmatchState*>(lua_touserdata(L, lua_upvalueindex(3)));
  const PatternStop* stop = StopAt(L, 4);
  if (st->pos > ls) return 0;
  PatternMatcher m(s, ls, p, lp, stop->should_stop, stop->ctx);
  const Status status = m.Search(st->pos, false, st->last == kNoMatchYet ? nullptr : s + st->last);
  if (status == Status::kNoMatch) return 0;
  if (status != Status::kMatch) return RaiseHalt(L, m, status, stop);
  st->pos = st->last = static_cast<size_t>(m.end() - s);
  return PushCaptures(L, m, true);
}

int l_pattern_gmatch(lua_State* L) {
  size_t ls;
  luaL_checklstring(L, 1, &ls);
  luaL_checkstring(L, 2);
  size_t init = StartOffset(luaL_optinteger(L, 3, 1), ls);
  if (init > ls) init = ls + 1;  // iterates over nothing
  lua_settop(L, 2);
  auto* st = static_cast<GmatchState*>(lua_newuserdatauv(L, sizeof(GmatchState), 0));
  st->pos = init;
  st->last = kNoMatchYet;
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushcclosure(L, l_pattern_gmatch_next, 4);
  return 1;
}

// gsub's output is all C (the text between matches, templates, replacement
// values), and a template is scanned in C: so the stop is asked every
// kOutputCheckBytes added or scanned, across matches, as the matcher asks it
// every so many steps. Trivially destructible: a raise may pass over it.
constexpr ptrdiff_t kOutputCheckBytes = 64 * 1024;

struct OutputCheck {
  const PatternStop* stop;
  ptrdiff_t left = kOutputCheckBytes;
  size_t charged = 0;  // the buffer's length at the last charge

  // Counts what was added to b since the last charge, and `scanned` bytes.
  void Charge(lua_State* L, luaL_Buffer* b, size_t scanned) {
    left -= static_cast<ptrdiff_t>(luaL_bufflen(b) - charged + scanned);
    charged = luaL_bufflen(b);
    if (left > 0) return;
    left = kOutputCheckBytes;
    if (stop->should_stop(stop->ctx)) stop->raise(stop->ctx, L);
  }
};

// gsub with a string replacement (argument 3): "%0" the match, "%1"-"%9" a
// capture, "%%" a '%'; any other '%' is an error.
void AddTemplate(lua_State* L, luaL_Buffer* b, const PatternMatcher& m, OutputCheck* check) {
  size_t len;
  const char* t = lua_tolstring(L, 3, &len);
  const char* end = t + len;
  const char* pct;
  while ((pct = static_cast<const char*>(std::memchr(t, '%', static_cast<size_t>(end - t)))) != nullptr) {
    check->Charge(L, b, static_cast<size_t>(pct - t) + 2);
    luaL_addlstring(b, t, static_cast<size_t>(pct - t));
    const char c = pct + 1 < end ? pct[1] : '\0';
    if (c == '%') {
      luaL_addchar(b, '%');
    } else if (c == '0') {
      luaL_addlstring(b, m.start(), static_cast<size_t>(m.end() - m.start()));
    } else if (c >= '1' && c <= '9') {
      const char* text;
      const ptrdiff_t n = CaptureText(L, m, c - '1', &text);
      if (n == PatternMatcher::kPosition) {
        lua_pushinteger(L, text - m.subject() + 1);
        luaL_addvalue(b);
      } else {
        luaL_addlstring(b, text, static_cast<size_t>(n));
      }
    } else {
      luaL_error(L, "invalid use of '%%' in replacement string");
    }
    t = pct + 2;
  }
  luaL_addlstring(b, t, static_cast<size_t>(end - t));
  check->Charge(L, b, static_cast<size_t>(end - t));
}

// Adds the replacement for the current match to b. Returns false when a
// function or table gave false or nil, which keeps the match as it was.
bool AddReplacement(lua_State* L, luaL_Buffer* b, const PatternMatcher& m, int repl_type, OutputCheck* check) {
  if (repl_type == LUA_TSTRING || repl_type == LUA_TNUMBER) {
    AddTemplate(L, b, m, check);
    return true;
  }
  if (repl_type == LUA_TFUNCTION) {
    lua_pushvalue(L, 3);
    const int n = PushCaptures(L, m, true);
    lua_call(L, n, 1);
  } else {
    PushCapture(L, m, 0);
    lua_gettable(L, 3);
  }
  if (!lua_toboolean(L, -1)) {
    lua_pop(L, 1);
    luaL_addlstring(b, m.start(), static_cast<size_t>(m.end() - m.start()));
    return false;
  }
  if (!lua_isstring(L, -1)) return luaL_error(L, "invalid replacement value (a %s)", luaL_typename(L, -1));
  luaL_addvalue(b);
  return true;
}

int l_pattern_gsub(lua_State* L) {
  size_t ls, lp;
  const char* s = luaL_checklstring(L, 1, &ls);
  const char* p = luaL_checklstring(L, 2, &lp);
  const int repl_type = lua_type(L, 3);
  const lua_Integer max_n = luaL_optinteger(L, 4, static_cast<lua_Integer>(ls) + 1);
  luaL_argexpected(
      L, repl_type == LUA_TNUMBER || repl_type == LUA_TSTRING || repl_type == LUA_TFUNCTION || repl_type == LUA_TTABLE,
      3, "string/function/table");
  const PatternStop* stop = StopAt(L, 1);
  const size_t anchored = lp > 0 && p[0] == '^' ? 1 : 0;
  PatternMatcher m(s, ls, p + anchored, lp - anchored, stop->should_stop, stop->ctx);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  size_t pos = 0;              // copied up to here
  const char* last = nullptr;  // end of the last match: no empty match right there
  lua_Integer n = 0;
  bool changed = false;
  Status status = Status::kNoMatch;
  OutputCheck check{stop};
  while (n < max_n && (status = m.Search(pos, anchored != 0, last)) == Status::kMatch) {
    luaL_addlstring(&b, s + pos, static_cast<size_t>(m.start() - (s + pos)));
    ++n;
    changed = AddReplacement(L, &b, m, repl_type, &check) || changed;
    check.Charge(L, &b, 0);
    last = m.end();
    pos = static_cast<size_t>(last - s);
    if (anchored) break;
  }
  if (status == Status::kError || status == Status::kStopped) return RaiseHalt(L, m, status, stop);
  if (changed) {
    luaL_addlstring(&b, s + pos, ls - pos);
    luaL_pushresult(&b);
  } else {
    lua_pushvalue(L, 1);  // nothing replaced: the subject itself
  }
  lua_pushinteger(L, n);
  return 2;
}

// Every function this file gives Lua; each has the PatternStop as upvalue 1.
constexpr luaL_Reg kPatternFunctions[] = {
    {"find", l_pattern_find}, {"match", l_pattern_match}, {"gmatch", l_pattern_gmatch},
    {"gsub", l_pattern_gsub}, {nullptr, nullptr},
};

// The host's stop check, for RegisterPatternApi.
bool PatternStopDue(void* host) {
  return static_cast<LuaHost*>(host)->StopDue();
}
int PatternRaiseStop(void*, lua_State* L) {
  return LuaHost::RaiseStop(L);
}

}  // namespace

void RegisterPatternFunctions(lua_State* L, int table, const PatternStop& stop) {
  lua_pushvalue(L, table);
  auto* ud = static_cast<PatternStop*>(lua_newuserdatauv(L, sizeof(PatternStop), 0));
  *ud = stop;
  luaL_setfuncs(L, kPatternFunctions, 1);
  lua_pop(L, 1);
}

void RegisterPatternApi(lua_State* L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  if (lua_getfield(L, -1, LUA_STRLIBNAME) == LUA_TTABLE) {
    RegisterPatternFunctions(L, -1, PatternStop{PatternStopDue, PatternRaiseStop, LuaHost::From(L)});
  }
  lua_pop(L, 2);
}

}  // namespace lua_tasks
