// SPDX-License-Identifier: MIT
// Bounded library functions: the standard ones Lua could make run for seconds, rewritten to stop when told.
//
// Design. Each function here keeps the behaviour of the Lua 5.4.4 function
// it replaces (arguments, results, errors; the reference manual §6) and
// meters its work with a WorkMeter, which asks LuaHost::StopDue every few
// tens of microseconds of work. As everywhere on the Lua side, arguments are
// checked before any work, and nothing with a destructor lives in a frame
// that raises. This file: installation, base (load, tonumber,
// collectgarbage), utf8 (len, offset), os.date and os.time; the string and table
// functions are in lua_api_bounded_string.cpp and lua_api_bounded_table.cpp.
#include "core/api/lua_api_bounded.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <ctime>

#include "core/base/clock.hpp"
#include "core/host/lua_host.hpp"
#include "core/limits/work_meter.hpp"

namespace lua_tasks {

namespace {

// ---------------------------------------------------------------- load

// The parser gets the chunk this many bytes at a time, and the stop is asked
// between two: parsing runs at about 15 ns a byte, so a piece is 60 us of it.
// (Small pieces also bound the parser's worst case between two checks: each
// label it meets is compared with up to 32,767 others of its function.)
constexpr size_t kLoadPiece = 4096;
constexpr size_t kUnitsPerLoadByte = 16;

// lua_load's reader over a chunk in memory.
struct TextReader {
  WorkMeter meter;
  bool metered;
  const char* s;
  size_t left;
};

const char* ReadText(lua_State* L, void* ud, size_t* size) {
  auto* r = static_cast<TextReader*>(ud);
  if (r->left == 0) {
    *size = 0;
    return nullptr;
  }
  const size_t n = r->left < kLoadPiece ? r->left : kLoadPiece;
  // Raising here is safe: lua_load runs its reader in protected mode.
  if (r->metered && r->meter.Add(n * kUnitsPerLoadByte)) LuaHost::RaiseStop(L);
  const char* p = r->s;
  r->s += n;
  r->left -= n;
  *size = n;
  return p;
}

// The slot above load's four arguments that keeps the reader function's last
// piece alive while the parser reads it (lua_load uses the stack itself, so a
// reader may not leave anything on top).
constexpr int kReservedSlot = 5;

// lua_load's reader over a Lua reader function: calls it for a piece, then
// hands that to the parser kLoadPiece bytes at a time.
struct FunctionReader {
  WorkMeter meter;
  const char* p = nullptr;
  size_t left = 0;
};

const char* ReadFromFunction(lua_State* L, void* ud, size_t* size) {
  auto* r = static_cast<FunctionReader*>(ud);
  if (r->left == 0) {
    // Asked before each call as well: a C function as the reader runs no
    // instruction at all (load(os.time) reads one endless numeral).
    if (r->meter.Add(WorkMeter::kPerStep)) LuaHost::RaiseStop(L);
    luaL_checkstack(L, 2, "too many nested functions");
    lua_pushvalue(L, 1);
    lua_call(L, 0, 1);
    if (lua_isnil(L, -1)) {
      lua_pop(L, 1);
      *size = 0;
      return nullptr;
    }
    if (!lua_isstring(L, -1)) luaL_error(L, "reader function must return a string");
    lua_replace(L, kReservedSlot);
    r->p = lua_tolstring(L, kReservedSlot, &r->left);
    if (r->left == 0) {  // an empty string ends the chunk
      *size = 0;
      return nullptr;
    }
  }
  const size_t n = r->left < kLoadPiece ? r->left : kLoadPiece;
  if (r->meter.Add(n * kUnitsPerLoadByte)) LuaHost::RaiseStop(L);
  const char* piece = r->p;
  r->p += n;
  r->left -= n;
  *size = n;
  return piece;
}

// load(chunk [, chunkname [, mode [, env]]])
int l_load(lua_State* L) {
  size_t len;
  const char* s = lua_tolstring(L, 1, &len);
  const char* mode = luaL_optstring(L, 3, "bt");
  const int env = lua_isnone(L, 4) ? 0 : 4;
  int status;
  if (s != nullptr) {
    const char* chunkname = luaL_optstring(L, 2, s);
    status = LoadText(L, s, len, chunkname, mode, true);
  } else {
    const char* chunkname = luaL_optstring(L, 2, "=(load)");
    luaL_checktype(L, 1, LUA_TFUNCTION);
    lua_settop(L, kReservedSlot);
    FunctionReader r{WorkMeter(L)};
    status = lua_load(L, ReadFromFunction, &r, chunkname, mode);
    r.meter.Done(L);
  }
  if (status != LUA_OK) {
    luaL_pushfail(L);
    lua_insert(L, -2);
    return 2;  // fail, message (a stop, too: the thread's next instruction raises it again)
  }
  if (env != 0) {
    lua_pushvalue(L, env);
    if (lua_setupvalue(L, -2, 1) == nullptr) lua_pop(L, 1);  // no upvalue: env unused
  }
  return 1;
}

// ---------------------------------------------------------------- tonumber

// Strings this long make tonumber charge its thread (CpuBudget::Charge):
// lua_stringtonumber (strtod) reads the whole string, at about 1 ns a byte,
// and cannot be cut.
constexpr size_t kChargeFrom = size_t{64} << 10;

bool IsSpace(unsigned char c) {
  return c == ' ' || c == '\f' || c == '\n' || c == '\r' || c == '\t' || c == '\v';
}

enum class Parsed { kNumber, kNotNumber, kStopped };

// tonumber(s, base) as Lua reads it: optional spaces and sign, alphanumeric
// digits below base, optional spaces, and nothing else (an embedded zero is
// not a space, so it fails the numeral). Wraps around on overflow, as Lua's.
Parsed ParseInBase(lua_State* L, const char* s, size_t len, int base, lua_Integer* out) {
  WorkMeter meter(L);
  size_t i = 0;
  auto skip_spaces = [&]() {
    while (i < len && IsSpace(static_cast<unsigned char>(s[i]))) {
      if ((++i & 0xffff) == 0 && meter.Add(0x10000)) return false;
    }
    return true;
  };
  if (!skip_spaces()) return Parsed::kStopped;
  bool neg = false;
  if (i < len && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
  if (i >= len || !std::isalnum(static_cast<unsigned char>(s[i]))) return Parsed::kNotNumber;
  lua_Unsigned n = 0;
  do {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const int digit = std::isdigit(c) ? c - '0' : std::toupper(c) - 'A' + 10;
    if (digit >= base) return Parsed::kNotNumber;
    n = n * static_cast<lua_Unsigned>(base) + static_cast<lua_Unsigned>(digit);
    if ((++i & 0xffff) == 0 && meter.Add(0x10000)) return Parsed::kStopped;
  } while (i < len && std::isalnum(static_cast<unsigned char>(s[i])));
  if (!skip_spaces()) return Parsed::kStopped;
  if (i != len) return Parsed::kNotNumber;
  *out = static_cast<lua_Integer>(neg ? 0u - n : n);
  meter.Done(L);
  return Parsed::kNumber;
}

// tonumber(v [, base])
int l_tonumber(lua_State* L) {
  if (lua_isnoneornil(L, 2)) {
    if (lua_type(L, 1) == LUA_TNUMBER) {
      lua_settop(L, 1);
      return 1;
    }
    size_t len;
    const char* s = lua_tolstring(L, 1, &len);
    if (s != nullptr) {
      const bool ok = lua_stringtonumber(L, s) == len + 1;
      if (len >= kChargeFrom) LuaHost::From(L)->Charge(L);
      if (ok) return 1;
    }
    luaL_checkany(L, 1);
  } else {
    const lua_Integer base = luaL_checkinteger(L, 2);
    luaL_checktype(L, 1, LUA_TSTRING);
    size_t len;
    const char* s = lua_tolstring(L, 1, &len);
    luaL_argcheck(L, 2 <= base && base <= 36, 2, "base out of range");
    lua_Integer n = 0;
    switch (ParseInBase(L, s, len, static_cast<int>(base), &n)) {
      case Parsed::kNumber:
        lua_pushinteger(L, n);
        return 1;
      case Parsed::kStopped:
        return LuaHost::RaiseStop(L);
      case Parsed::kNotNumber:
        break;
    }
  }
  luaL_pushfail(L);
  return 1;
}

// ---------------------------------------------------------------- collectgarbage

// collectgarbage([opt [, ...]]): Lua's options. A full collection (collect,
// a step, a change of mode) cannot be cut and takes time in proportion to
// the heap, so every call charges its thread: the next instruction reads the
// clock, and a loop of them meets the deadline within one collection.
int l_collectgarbage(lua_State* L) {
  static const char* const kOptions[] = {"stop",       "restart",   "collect",      "count",       "step", "setpause",
                                         "setstepmul", "isrunning", "generational", "incremental", nullptr};
  static const int kWhat[] = {LUA_GCSTOP,     LUA_GCRESTART,    LUA_GCCOLLECT,   LUA_GCCOUNT, LUA_GCSTEP,
                              LUA_GCSETPAUSE, LUA_GCSETSTEPMUL, LUA_GCISRUNNING, LUA_GCGEN,   LUA_GCINC};
  const int what = kWhat[luaL_checkoption(L, 1, "collect", kOptions)];
  int result = 0;
  switch (what) {
    case LUA_GCCOUNT: {
      const int kb = lua_gc(L, what);
      const int bytes = lua_gc(L, LUA_GCCOUNTB);
      result = kb;
      if (kb != -1) lua_pushnumber(L, static_cast<lua_Number>(kb) + static_cast<lua_Number>(bytes) / 1024);
      break;
    }
    case LUA_GCSTEP:
      result = lua_gc(L, what, static_cast<int>(luaL_optinteger(L, 2, 0)));
      if (result != -1) lua_pushboolean(L, result);
      break;
    case LUA_GCSETPAUSE:
    case LUA_GCSETSTEPMUL:
      result = lua_gc(L, what, static_cast<int>(luaL_optinteger(L, 2, 0)));
      if (result != -1) lua_pushinteger(L, result);
      break;
    case LUA_GCISRUNNING:
      result = lua_gc(L, what);
      if (result != -1) lua_pushboolean(L, result);
      break;
    case LUA_GCGEN:
    case LUA_GCINC: {
      const int a = static_cast<int>(luaL_optinteger(L, 2, 0));
      const int b = static_cast<int>(luaL_optinteger(L, 3, 0));
      result =
          what == LUA_GCGEN ? lua_gc(L, what, a, b) : lua_gc(L, what, a, b, static_cast<int>(luaL_optinteger(L, 4, 0)));
      if (result != -1) lua_pushstring(L, result == LUA_GCINC ? "incremental" : "generational");
      break;
    }
    default:
      result = lua_gc(L, what);
      if (result != -1) lua_pushinteger(L, result);
      break;
  }
  LuaHost::From(L)->Charge(L);
  if (result == -1) luaL_pushfail(L);  // called from a finalizer, where Lua refuses
  return 1;
}

// ---------------------------------------------------------------- utf8

constexpr uint32_t kMaxUtf = 0x7FFFFFFFu;
constexpr uint32_t kMaxUnicode = 0x10FFFFu;

bool IsCont(const char* p) {
  return (static_cast<unsigned char>(*p) & 0xC0) == 0x80;
}

// Decodes the sequence at s (the string's terminating zero ends any run):
// the position after it, or null if it is not a valid (strict: also not a
// surrogate nor past U+10FFFF) sequence.
const char* DecodeUtf8(const char* s, bool strict) {
  unsigned int c = static_cast<unsigned char>(s[0]);
  uint32_t code;
  if (c < 0x80) {
    code = c;
  } else {
    static constexpr uint32_t kSmallest[] = {~uint32_t{0}, 0x80, 0x800, 0x10000u, 0x200000u, 0x4000000u};
    int extra = 0;
    uint32_t bits = 0;
    for (; c & 0x40; c <<= 1) {
      const unsigned int cc = static_cast<unsigned char>(s[++extra]);
      if ((cc & 0xC0) != 0x80) return nullptr;
      bits = (bits << 6) | (cc & 0x3F);
    }
    if (extra > 5) return nullptr;
    code = bits | (static_cast<uint32_t>(c & 0x7F) << (extra * 5));
    if (code > kMaxUtf || code < kSmallest[extra]) return nullptr;
    s += extra;
  }
  if (strict && (code > kMaxUnicode || (code >= 0xD800u && code <= 0xDFFFu))) return nullptr;
  return s + 1;
}

// A relative position (negative: from the end) as utf8 reads it.
lua_Integer RelativePosition(lua_Integer pos, size_t len) {
  if (pos >= 0) return pos;
  if (0u - static_cast<size_t>(pos) > len) return 0;
  return static_cast<lua_Integer>(len) + pos + 1;
}

// utf8.len(s [, i [, j [, lax]]])
int l_utf8_len(lua_State* L) {
  size_t len;
  const char* s = luaL_checklstring(L, 1, &len);
  lua_Integer i = RelativePosition(luaL_optinteger(L, 2, 1), len);
  lua_Integer j = RelativePosition(luaL_optinteger(L, 3, -1), len);
  const bool strict = !lua_toboolean(L, 4);
  luaL_argcheck(L, 1 <= i && --i <= static_cast<lua_Integer>(len), 2, "initial position out of bounds");
  luaL_argcheck(L, --j < static_cast<lua_Integer>(len), 3, "final position out of bounds");
  WorkMeter meter(L);
  lua_Integer n = 0;
  lua_Integer metered = i;
  while (i <= j) {
    const char* next = DecodeUtf8(s + i, strict);
    if (next == nullptr) {
      luaL_pushfail(L);
      lua_pushinteger(L, i + 1);
      return 2;
    }
    i = next - s;
    ++n;
    if (i - metered >= 0x4000) {  // decoding runs at about 3 ns a byte
      if (meter.Add(static_cast<size_t>(i - metered) * 4)) return LuaHost::RaiseStop(L);
      metered = i;
    }
  }
  meter.Done(L);
  lua_pushinteger(L, n);
  return 1;
}

// utf8.offset(s, n [, i])
int l_utf8_offset(lua_State* L) {
  size_t len;
  const char* s = luaL_checklstring(L, 1, &len);
  lua_Integer n = luaL_checkinteger(L, 2);
  lua_Integer pos = n >= 0 ? 1 : static_cast<lua_Integer>(len) + 1;
  pos = RelativePosition(luaL_optinteger(L, 3, pos), len);
  luaL_argcheck(L, 1 <= pos && --pos <= static_cast<lua_Integer>(len), 3, "position out of bounds");
  WorkMeter meter(L);
  lua_Integer metered = pos;
  auto step = [&]() {  // every 16 KB walked, the meter
    const lua_Integer walked = pos > metered ? pos - metered : metered - pos;
    if (walked < 0x4000) return false;
    metered = pos;
    return meter.Add(static_cast<size_t>(walked));
  };
  if (n == 0) {
    while (pos > 0 && IsCont(s + pos)) {
      --pos;
      if (step()) return LuaHost::RaiseStop(L);
    }
  } else {
    if (IsCont(s + pos)) return luaL_error(L, "initial position is a continuation byte");
    if (n < 0) {
      while (n < 0 && pos > 0) {
        do {
          --pos;
        } while (pos > 0 && IsCont(s + pos));
        ++n;
        if (step()) return LuaHost::RaiseStop(L);
      }
    } else {
      --n;  // the first character is the one at pos
      while (n > 0 && pos < static_cast<lua_Integer>(len)) {
        do {
          ++pos;
        } while (IsCont(s + pos));  // the terminating zero stops it
        --n;
        if (step()) return LuaHost::RaiseStop(L);
      }
    }
  }
  meter.Done(L);
  if (n == 0) {
    lua_pushinteger(L, pos + 1);
  } else {
    luaL_pushfail(L);
  }
  return 1;
}

// ---------------------------------------------------------------- os.date, os.time

// "Now" for os.time() and os.date(): the scheduler's wall clock, in whole
// seconds. glibc's time() reads a coarse clock that moves once per kernel
// tick, so a task woken by UNTIL_TIME at t (the scheduler saw t pass) could
// still read t - 1 there, and yesterday's date at a midnight job.
time_t Now(lua_State* L) {
  const Clock* clock = LuaHost::From(L)->clock();
  if (clock == nullptr) return time(nullptr);
  const int64_t ns = clock->WallNs();
  constexpr int64_t kNsPerS = 1000000000;
  return static_cast<time_t>(ns / kNsPerS - (ns % kNsPerS < 0 ? 1 : 0));  // floor
}

// os.time([table]): without a table, Now; with one, Lua's own (upvalue 1).
int l_os_time(lua_State* L) {
  if (lua_isnoneornil(L, 1)) {
    lua_pushinteger(L, static_cast<lua_Integer>(Now(L)));
    return 1;
  }
  luaL_checktype(L, 1, LUA_TTABLE);  // here, so the message names os.time
  lua_settop(L, 1);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, 1, 1);
  return 1;
}

// The conversions strftime takes in C99 (one character), then those with an
// E or O modifier (two).
constexpr const char kDateOne[] = "aAbBcCdDeFgGhHIjmMnprRStTuUVwWxXyYzZ%";
constexpr const char* const kDateTwo[] = {"Ec", "EC", "Ex", "EX", "Ey", "EY", "Od", "Oe", "OH", "OI",
                                          "Om", "OM", "OS", "Ou", "OU", "OV", "Ow", "OW", "Oy"};

// Sets t.<key> = value for os.date("*t").
void SetField(lua_State* L, const char* key, int value, int delta) {
  lua_pushinteger(L, static_cast<lua_Integer>(value) + delta);
  lua_setfield(L, -2, key);
}

// os.date([format [, time]])
int l_os_date(lua_State* L) {
  size_t flen;
  const char* f = luaL_optlstring(L, 1, "%c", &flen);
  time_t t;
  if (lua_isnoneornil(L, 2)) {
    t = Now(L);
  } else {
    const lua_Integer v = luaL_checkinteger(L, 2);
    t = static_cast<time_t>(v);
    luaL_argcheck(L, static_cast<lua_Integer>(t) == v, 2, "time out-of-bounds");
  }
  const char* end = f + flen;
  struct tm parts;
  struct tm* tm;
  if (*f == '!') {
    tm = gmtime_r(&t, &parts);
    ++f;
  } else {
    tm = localtime_r(&t, &parts);
  }
  if (tm == nullptr) return luaL_error(L, "date result cannot be represented in this installation");
  if (std::strcmp(f, "*t") == 0) {
    lua_createtable(L, 0, 9);
    SetField(L, "year", tm->tm_year, 1900);
    SetField(L, "month", tm->tm_mon, 1);
    SetField(L, "day", tm->tm_mday, 0);
    SetField(L, "hour", tm->tm_hour, 0);
    SetField(L, "min", tm->tm_min, 0);
    SetField(L, "sec", tm->tm_sec, 0);
    SetField(L, "yday", tm->tm_yday, 1);
    SetField(L, "wday", tm->tm_wday, 1);
    if (tm->tm_isdst >= 0) {
      lua_pushboolean(L, tm->tm_isdst);
      lua_setfield(L, -2, "isdst");
    }
    return 1;
  }
  WorkMeter meter(L);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  while (f < end) {
    if (*f != '%') {
      const char* pct = static_cast<const char*>(std::memchr(f, '%', static_cast<size_t>(end - f)));
      const size_t n = std::min<size_t>((pct == nullptr ? end : pct) - f, size_t{1} << 16);
      luaL_addlstring(&b, f, n);
      f += n;
      if (meter.Add(n)) return LuaHost::RaiseStop(L);
      continue;
    }
    ++f;  // the conversion after '%'
    char conv[4] = {'%', 0, 0, 0};
    const size_t left = static_cast<size_t>(end - f);
    if (left >= 1 && std::memchr(kDateOne, *f, sizeof(kDateOne) - 1) != nullptr && *f != '\0') {
      conv[1] = *f++;
    } else {
      bool found = false;
      for (const char* two : kDateTwo) {
        if (left >= 2 && f[0] == two[0] && f[1] == two[1]) {
          conv[1] = *f++;
          conv[2] = *f++;
          found = true;
          break;
        }
      }
      if (!found) {
        return luaL_argerror(L, 1, lua_pushfstring(L, "invalid conversion specifier '%%%s'", f));
      }
    }
    constexpr size_t kMost = 250;  // one conversion's longest result
    char* out = luaL_prepbuffsize(&b, kMost);
    luaL_addsize(&b, strftime(out, kMost, conv, tm));
    if (meter.Add(WorkMeter::kPerStep)) return LuaHost::RaiseStop(L);
  }
  luaL_pushresult(&b);
  meter.Done(L);
  return 1;
}

// Sets t[name] = f for the table at `table`, if that is a table.
void Replace(lua_State* L, int table, const char* name, lua_CFunction f) {
  lua_pushcfunction(L, f);
  lua_setfield(L, table, name);
}

}  // namespace

int LoadText(lua_State* L, const char* s, size_t len, const char* chunkname, const char* mode, bool metered) {
  TextReader r{WorkMeter(L), metered, s, len};
  const int status = lua_load(L, ReadText, &r, chunkname, mode);
  r.meter.Done(L);
  return status;
}

void InstallBoundedFunctions(lua_State* L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  const int loaded = lua_gettop(L);
  if (lua_getfield(L, loaded, LUA_GNAME) == LUA_TTABLE) {
    const int g = lua_gettop(L);
    if (lua_getfield(L, g, "load") != LUA_TNIL) Replace(L, g, "load", l_load);
    lua_pop(L, 1);
    Replace(L, g, "tonumber", l_tonumber);
    Replace(L, g, "collectgarbage", l_collectgarbage);
  }
  lua_pop(L, 1);
  if (lua_getfield(L, loaded, LUA_STRLIBNAME) == LUA_TTABLE) RegisterBoundedString(L, lua_gettop(L));
  lua_pop(L, 1);
  if (lua_getfield(L, loaded, LUA_TABLIBNAME) == LUA_TTABLE) RegisterBoundedTable(L, lua_gettop(L));
  lua_pop(L, 1);
  if (lua_getfield(L, loaded, LUA_UTF8LIBNAME) == LUA_TTABLE) {
    Replace(L, lua_gettop(L), "len", l_utf8_len);
    Replace(L, lua_gettop(L), "offset", l_utf8_offset);
  }
  lua_pop(L, 1);
  if (lua_getfield(L, loaded, LUA_OSLIBNAME) == LUA_TTABLE) {
    const int os = lua_gettop(L);
    if (lua_getfield(L, os, "date") != LUA_TNIL) Replace(L, os, "date", l_os_date);
    lua_pop(L, 1);
    if (lua_getfield(L, os, "time") != LUA_TNIL) {
      lua_pushcclosure(L, l_os_time, 1);  // the original is its upvalue
      lua_setfield(L, os, "time");
    } else {
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 2);
}

}  // namespace lua_tasks
