// SPDX-License-Identifier: MIT
// The yield instruction parser: coroutine.yield(instruction, value, unit) into the wait it asks for.
#include "core/scheduling/yield_instruction.hpp"
#include "core/base/ascii.hpp"

#include <cmath>
#include <cstdio>
#include <iterator>

namespace lua_tasks {

namespace {

struct UnitRow {
  const char* name;
  Unit unit;
};
constexpr UnitRow kUnits[] = {
    {"NANOSECONDS", Unit::kNanoseconds},
    {"MICROSECONDS", Unit::kMicroseconds},
    {"MILLISECONDS", Unit::kMilliseconds},
    {"SECONDS", Unit::kSeconds},
    {"MINUTES", Unit::kMinutes},
    {"HOURS", Unit::kHours},
    {"DAYS", Unit::kDays},
};
static_assert(std::size(kUnits) == kUnitCount, "YieldNames::units and the tasks.unit table follow kUnits");
constexpr const char kUnitList[] = "NANOSECONDS, MICROSECONDS, MILLISECONDS, SECONDS, MINUTES, HOURS or DAYS";

struct KindRow {
  const char* name;
  WaitKind kind;
};
constexpr KindRow kKinds[] = {
    {"IMMEDIATE", WaitKind::kImmediate},       {"FOR", WaitKind::kFor},
    {"UNTIL_TIME", WaitKind::kUntilTime},      {"UNTIL_NEXT", WaitKind::kUntilNext},
    {"INDEFINITELY", WaitKind::kIndefinitely}, {"COMMIT", WaitKind::kCommit},
};
static_assert(std::size(kKinds) == kKindCount, "YieldNames::kinds follows kKinds");
constexpr const char kKindList[] = "IMMEDIATE, FOR, UNTIL_TIME, UNTIL_NEXT, INDEFINITELY or COMMIT";

bool EqualsUpper(std::string_view s, const char* upper) {
  // Names are almost always written in capitals: try the exact match first.
  return s.compare(upper) == 0 || EqualsIgnoringAsciiCase(s, upper);
}

// A short printable rendering of the value at idx, for messages.
void Show(lua_State* L, int idx, char* buf, size_t len) {
  switch (lua_type(L, idx)) {
    case LUA_TSTRING: {
      size_t n;
      const char* s = lua_tolstring(L, idx, &n);
      std::snprintf(buf, len, "\"%.40s\"", s);
      return;
    }
    case LUA_TNUMBER:
      if (lua_isinteger(L, idx)) {
        std::snprintf(buf, len, "%lld", static_cast<long long>(lua_tointeger(L, idx)));
      } else {
        std::snprintf(buf, len, "%.14g", lua_tonumber(L, idx));
      }
      return;
    default:
      std::snprintf(buf, len, "a %s", lua_typename(L, lua_type(L, idx)));
  }
}

}  // namespace

bool ParseUnit(std::string_view name, Unit* unit) {
  for (const UnitRow& r : kUnits) {
    if (EqualsUpper(name, r.name)) {
      *unit = r.unit;
      return true;
    }
  }
  return false;
}

const char* UnitName(Unit unit) {
  return kUnits[static_cast<int>(unit)].name;
}

const char* WaitKindName(WaitKind kind) {
  switch (kind) {
    case WaitKind::kNone:
      return "NONE";
    case WaitKind::kImmediate:
      return "IMMEDIATE";
    case WaitKind::kFor:
      return "FOR";
    case WaitKind::kUntilTime:
      return "UNTIL_TIME";
    case WaitKind::kUntilNext:
      return "UNTIL_NEXT";
    case WaitKind::kIndefinitely:
      return "INDEFINITELY";
    case WaitKind::kCommit:
      return "COMMIT";
    case WaitKind::kJoin:
      return "JOIN";
    case WaitKind::kPromise:
      return "PROMISE";
    case WaitKind::kReceive:
      return "RECEIVE";
    case WaitKind::kRestore:
      return "RESTORE";
  }
  return "NONE";
}

const char* KindName(int i) {
  return kKinds[i].name;
}

bool ParseYieldInstruction(lua_State* L, int first, int n, const Clock& clock, const YieldNames* names,
                           WaitRequest* out, char* err, size_t errlen) {
  *out = WaitRequest{};
  char shown[64];
  if (n == 0) return true;  // bare yield: IMMEDIATE
  // The object itself (null for a number, a boolean or nil): an interned
  // name matches it by address, with no type check or text compare.
  const void* obj = names != nullptr ? lua_topointer(L, first) : nullptr;
  bool found = false;
  for (int i = 0; obj != nullptr && i < kKindCount && !found; ++i) {
    if (obj == names->kinds[i]) {
      out->kind = kKinds[i].kind;
      found = true;
    }
  }
  if (!found) {
    if (lua_isnil(L, first)) return true;  // IMMEDIATE
    if (lua_type(L, first) != LUA_TSTRING) {
      Show(L, first, shown, sizeof shown);
      std::snprintf(err, errlen, "bad yield instruction: %s (expected a string: %s)", shown, kKindList);
      return false;
    }
    size_t len;
    const char* s = lua_tolstring(L, first, &len);
    for (int i = 0; i < kKindCount && !found; ++i) {
      if (EqualsUpper(std::string_view(s, len), kKinds[i].name)) {
        out->kind = kKinds[i].kind;
        found = true;
      }
    }
    if (!found) {
      Show(L, first, shown, sizeof shown);
      std::snprintf(err, errlen, "unknown yield instruction %s (expected %s)", shown, kKindList);
      return false;
    }
  }
  const int value = first + 1;
  const int unit_idx = first + 2;
  const int value_type = n >= 2 ? lua_type(L, value) : LUA_TNONE;
  const bool has_value = value_type != LUA_TNONE && value_type != LUA_TNIL;
  if (out->kind == WaitKind::kFor || out->kind == WaitKind::kUntilTime) {
    const void* uobj = n >= 3 && names != nullptr ? lua_topointer(L, unit_idx) : nullptr;
    bool known = false;
    for (int i = 0; uobj != nullptr && i < kUnitCount && !known; ++i) {
      if (uobj == names->units[i]) {
        out->unit = static_cast<Unit>(i);
        known = true;
      }
    }
    if (!known && n >= 3 && !lua_isnil(L, unit_idx)) {
      const char* u = lua_type(L, unit_idx) == LUA_TSTRING ? lua_tostring(L, unit_idx) : nullptr;
      if (u == nullptr || !ParseUnit(std::string_view(u), &out->unit)) {
        Show(L, unit_idx, shown, sizeof shown);
        std::snprintf(err, errlen, "unknown time unit %s for %s (expected %s)", shown, WaitKindName(out->kind),
                      kUnitList);
        return false;
      }
    }
    if (!has_value || value_type != LUA_TNUMBER) {
      if (has_value) {
        Show(L, value, shown, sizeof shown);
      } else {
        std::snprintf(shown, sizeof shown, "nothing");
      }
      std::snprintf(err, errlen, "%s needs a number %s, got %s", WaitKindName(out->kind),
                    out->kind == WaitKind::kFor ? "of time units to wait" : "of time units since the Unix epoch",
                    shown);
      return false;
    }
    const double v = lua_tonumber(L, value);
    const double ns = v * static_cast<double>(UnitNs(out->unit));
    if (std::isnan(v) || std::isinf(v)) {
      Show(L, value, shown, sizeof shown);
      std::snprintf(err, errlen, "%s value must be finite, got %s", WaitKindName(out->kind), shown);
      return false;
    }
    if (out->kind == WaitKind::kFor) {
      if (v < 0) {
        Show(L, value, shown, sizeof shown);
        std::snprintf(err, errlen, "FOR duration must be >= 0, got %s %s", shown, UnitName(out->unit));
        return false;
      }
      if (ns > static_cast<double>(kMaxWaitNs)) {
        Show(L, value, shown, sizeof shown);
        std::snprintf(err, errlen, "FOR duration too large: %s %s (at most 100 years)", shown, UnitName(out->unit));
        return false;
      }
      out->duration_ns = static_cast<int64_t>(std::ceil(ns));
    } else {
      // The clock is read only here: the other instructions never need it.
      if (ns < 0 || ns > static_cast<double>(clock.WallNs()) + static_cast<double>(kMaxWaitNs)) {
        Show(L, value, shown, sizeof shown);
        std::snprintf(err, errlen, "UNTIL_TIME out of range: %s %s since the epoch (allowed 0 to 100 years from now)",
                      shown, UnitName(out->unit));
        return false;
      }
      out->wall_ns = static_cast<int64_t>(std::ceil(ns));
    }
  } else if (out->kind == WaitKind::kUntilNext) {
    if (!has_value || value_type != LUA_TSTRING) {
      if (has_value) {
        Show(L, value, shown, sizeof shown);
      } else {
        std::snprintf(shown, sizeof shown, "nothing");
      }
      std::snprintf(err, errlen, "UNTIL_NEXT needs a cron expression string, got %s", shown);
      return false;
    }
    out->cron_index = value;
    if (n >= 3 && !lua_isnil(L, unit_idx)) {
      if (lua_type(L, unit_idx) != LUA_TSTRING) {
        Show(L, unit_idx, shown, sizeof shown);
        std::snprintf(err, errlen, "UNTIL_NEXT time zone must be an IANA name string, got %s", shown);
        return false;
      }
      out->zone_index = unit_idx;
    }
  }
  return true;
}

}  // namespace lua_tasks
