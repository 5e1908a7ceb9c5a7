// SPDX-License-Identifier: MIT
// Tests for the yield instruction parser: rows of coroutine.yield arguments and the wait or error each gives.
#include "core/scheduling/yield_instruction.hpp"

#include <cctype>
#include <cstdint>
#include <ostream>
#include <string>

#include <gtest/gtest.h>

#include "test_clocks.hpp"

namespace lua_tasks {
namespace {

constexpr int64_t kS = 1'000'000'000;

struct Row {
  const char* args;  // Lua expressions, as written inside coroutine.yield(...)
  WaitKind kind;
  int64_t duration_ns;  // FOR
  int64_t wall_ns;      // UNTIL_TIME
  Unit unit;
  const char* error;  // null: parses
};
void PrintTo(const Row& row, std::ostream* os) {
  *os << "coroutine.yield(" << row.args << ")";
}

// What ParseYieldInstruction makes of `args`, evaluated in a plain state.
struct Parsed {
  bool ok;
  WaitRequest req;
  std::string error;
};

Parsed Parse(const char* args, const Clock& clock, bool interned = false) {
  lua_State* L = luaL_newstate();
  luaL_openlibs(L);
  YieldNames names;
  for (int i = 0; i < kKindCount; ++i) {
    lua_pushstring(L, KindName(i));
    names.kinds[i] = lua_topointer(L, -1);
  }
  for (int i = 0; i < kUnitCount; ++i) {
    lua_pushstring(L, UnitName(static_cast<Unit>(i)));
    names.units[i] = lua_topointer(L, -1);
  }
  const int base = lua_gettop(L);
  const std::string src = std::string("return ") + args;
  EXPECT_EQ(luaL_dostring(L, src.c_str()), LUA_OK) << args;
  Parsed p{};
  char err[256] = "";
  p.ok = ParseYieldInstruction(L, base + 1, lua_gettop(L) - base, clock, interned ? &names : nullptr, &p.req, err,
                               sizeof err);
  p.error = err;
  lua_close(L);
  return p;
}

const FakeClock kClock;  // wall time 1,700,000,000 s since the epoch
const int64_t kNow = kClock.WallNs();

// clang-format off
const Row kRows[] = {
    // No instruction: IMMEDIATE.
    {"",                              WaitKind::kImmediate,    0, 0, Unit::kSeconds, nullptr},
    {"nil",                           WaitKind::kImmediate,    0, 0, Unit::kSeconds, nullptr},
    {"'IMMEDIATE'",                   WaitKind::kImmediate,    0, 0, Unit::kSeconds, nullptr},
    {"'immediate'",                   WaitKind::kImmediate,    0, 0, Unit::kSeconds, nullptr},
    {"'INDEFINITELY'",                WaitKind::kIndefinitely, 0, 0, Unit::kSeconds, nullptr},
    {"'COMMIT', 1, 2",                WaitKind::kCommit,       0, 0, Unit::kSeconds, nullptr},
    // FOR: seconds by default, any unit by name in any case, rounded up to a nanosecond.
    {"'FOR', 2",                      WaitKind::kFor,   2 * kS, 0, Unit::kSeconds, nullptr},
    {"'for', 0",                      WaitKind::kFor,   0,      0, Unit::kSeconds, nullptr},
    {"'FOR', 1.5, 'MILLISECONDS'",    WaitKind::kFor,   1'500'000, 0, Unit::kMilliseconds, nullptr},
    {"'FOR', 3, 'minutes'",           WaitKind::kFor,   180 * kS, 0, Unit::kMinutes, nullptr},
    {"'FOR', 1, 'DAYS'",              WaitKind::kFor,   86'400 * kS, 0, Unit::kDays, nullptr},
    {"'FOR', 0.5, 'NANOSECONDS'",     WaitKind::kFor,   1,      0, Unit::kNanoseconds, nullptr},
    {"'FOR', 2, nil",                 WaitKind::kFor,   2 * kS, 0, Unit::kSeconds, nullptr},
    // UNTIL_TIME: time since the epoch, up to 100 years from now.
    {"'UNTIL_TIME', 1700000000",      WaitKind::kUntilTime, 0, 1'700'000'000 * kS, Unit::kSeconds, nullptr},
    {"'UNTIL_TIME', 1700000000000, 'MILLISECONDS'", WaitKind::kUntilTime, 0, 1'700'000'000 * kS, Unit::kMilliseconds, nullptr},
    {"'UNTIL_TIME', 0",               WaitKind::kUntilTime, 0, 0, Unit::kSeconds, nullptr},
    // UNTIL_NEXT: the cron text is checked later (lua_api_yield.cpp), here only its type.
    {"'UNTIL_NEXT', '* * * * *'",     WaitKind::kUntilNext, 0, 0, Unit::kSeconds, nullptr},
    {"'UNTIL_NEXT', '@daily', 'Europe/Paris'", WaitKind::kUntilNext, 0, 0, Unit::kSeconds, nullptr},
    // Errors: what was given, and what is accepted.
    {"42",                            WaitKind::kImmediate, 0, 0, Unit::kSeconds,
     "bad yield instruction: 42 (expected a string: IMMEDIATE, FOR, UNTIL_TIME, UNTIL_NEXT, INDEFINITELY or COMMIT)"},
    {"{}",                            WaitKind::kImmediate, 0, 0, Unit::kSeconds,
     "bad yield instruction: a table (expected a string: IMMEDIATE, FOR, UNTIL_TIME, UNTIL_NEXT, INDEFINITELY or COMMIT)"},
    {"'SOON'",                        WaitKind::kImmediate, 0, 0, Unit::kSeconds,
     "unknown yield instruction \"SOON\" (expected IMMEDIATE, FOR, UNTIL_TIME, UNTIL_NEXT, INDEFINITELY or COMMIT)"},
    {"'FORE', 1",                     WaitKind::kImmediate, 0, 0, Unit::kSeconds,
     "unknown yield instruction \"FORE\" (expected IMMEDIATE, FOR, UNTIL_TIME, UNTIL_NEXT, INDEFINITELY or COMMIT)"},
    {"'FOR'",                         WaitKind::kFor, 0, 0, Unit::kSeconds,
     "FOR needs a number of time units to wait, got nothing"},
    {"'FOR', '5'",                    WaitKind::kFor, 0, 0, Unit::kSeconds,
     "FOR needs a number of time units to wait, got \"5\""},
    {"'FOR', -1",                     WaitKind::kFor, 0, 0, Unit::kSeconds,
     "FOR duration must be >= 0, got -1 SECONDS"},
    {"'FOR', 0/0",                    WaitKind::kFor, 0, 0, Unit::kSeconds, nullptr},  // message varies: see below
    {"'FOR', math.huge",              WaitKind::kFor, 0, 0, Unit::kSeconds,
     "FOR value must be finite, got inf"},
    {"'FOR', 101 * 365, 'DAYS'",      WaitKind::kFor, 0, 0, Unit::kDays,
     "FOR duration too large: 36865 DAYS (at most 100 years)"},
    {"'FOR', 1, 'WEEKS'",             WaitKind::kFor, 0, 0, Unit::kSeconds,
     "unknown time unit \"WEEKS\" for FOR (expected NANOSECONDS, MICROSECONDS, MILLISECONDS, SECONDS, MINUTES, HOURS or DAYS)"},
    {"'FOR', 1, 7",                   WaitKind::kFor, 0, 0, Unit::kSeconds,
     "unknown time unit 7 for FOR (expected NANOSECONDS, MICROSECONDS, MILLISECONDS, SECONDS, MINUTES, HOURS or DAYS)"},
    {"'UNTIL_TIME'",                  WaitKind::kUntilTime, 0, 0, Unit::kSeconds,
     "UNTIL_TIME needs a number of time units since the Unix epoch, got nothing"},
    {"'UNTIL_TIME', -1",              WaitKind::kUntilTime, 0, 0, Unit::kSeconds,
     "UNTIL_TIME out of range: -1 SECONDS since the epoch (allowed 0 to 100 years from now)"},
    {"'UNTIL_TIME', 1700000000 + 101 * 365 * 86400", WaitKind::kUntilTime, 0, 0, Unit::kSeconds,
     "UNTIL_TIME out of range: 4885136000 SECONDS since the epoch (allowed 0 to 100 years from now)"},
    {"'UNTIL_NEXT'",                  WaitKind::kUntilNext, 0, 0, Unit::kSeconds,
     "UNTIL_NEXT needs a cron expression string, got nothing"},
    {"'UNTIL_NEXT', 5",               WaitKind::kUntilNext, 0, 0, Unit::kSeconds,
     "UNTIL_NEXT needs a cron expression string, got 5"},
    {"'UNTIL_NEXT', '* * * * *', 2",  WaitKind::kUntilNext, 0, 0, Unit::kSeconds,
     "UNTIL_NEXT time zone must be an IANA name string, got 2"},
};
// clang-format on

class YieldInstructionRows : public ::testing::TestWithParam<Row> {};

TEST_P(YieldInstructionRows, ParsesToItsWaitOrNamesWhatIsWrong) {
  const Row& row = GetParam();
  for (const bool interned : {false, true}) {  // matched by pointer or by text: the same answer
    const Parsed p = Parse(row.args, kClock, interned);
    if (std::string(row.args) == "'FOR', 0/0") {  // NaN prints as nan or -nan, by platform
      EXPECT_FALSE(p.ok);
      EXPECT_EQ(p.error.rfind("FOR value must be finite, got ", 0), 0u) << p.error;
      continue;
    }
    if (row.error != nullptr) {
      EXPECT_FALSE(p.ok) << row.args;
      EXPECT_EQ(p.error, row.error) << row.args;
      continue;
    }
    ASSERT_TRUE(p.ok) << row.args << ": " << p.error;
    EXPECT_EQ(p.req.kind, row.kind) << row.args;
    EXPECT_EQ(p.req.duration_ns, row.duration_ns) << row.args;
    EXPECT_EQ(p.req.wall_ns, row.wall_ns) << row.args;
    EXPECT_EQ(p.req.unit, row.unit) << row.args;
  }
}

INSTANTIATE_TEST_SUITE_P(Rows, YieldInstructionRows, ::testing::ValuesIn(kRows));

TEST(YieldInstruction, UntilNextPointsAtItsExpressionAndZoneOnTheStack) {
  lua_State* L = luaL_newstate();
  lua_pushstring(L, "UNTIL_NEXT");
  lua_pushstring(L, "0 9 * * *");
  lua_pushstring(L, "Asia/Tokyo");
  WaitRequest req;
  char err[256];
  ASSERT_TRUE(ParseYieldInstruction(L, 1, 3, kClock, nullptr, &req, err, sizeof err)) << err;
  EXPECT_EQ(req.cron_index, 2);
  EXPECT_EQ(req.zone_index, 3);
  ASSERT_TRUE(ParseYieldInstruction(L, 1, 2, kClock, nullptr, &req, err, sizeof err)) << err;
  EXPECT_EQ(req.zone_index, 0);  // none given: the runtime's default zone
  lua_close(L);
}

TEST(YieldInstruction, UntilTimeIsBoundedByTheClockItIsGiven) {
  FakeClock later;
  later.wall = kNow + 50 * 365 * 86'400 * kS;  // the 100-year bound moves with now
  const char* args = "'UNTIL_TIME', 1700000000 + 120 * 365 * 86400";
  EXPECT_FALSE(Parse(args, kClock).ok);
  EXPECT_TRUE(Parse(args, later).ok);
}

TEST(YieldInstruction, UnitNamesParseInAnyCaseAndRoundTrip) {
  for (int i = 0; i < kUnitCount; ++i) {
    const Unit u = static_cast<Unit>(i);
    std::string lower = UnitName(u);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    Unit parsed = Unit::kSeconds;
    EXPECT_TRUE(ParseUnit(UnitName(u), &parsed));
    EXPECT_EQ(parsed, u);
    EXPECT_TRUE(ParseUnit(lower, &parsed)) << lower;
    EXPECT_EQ(parsed, u);
  }
  Unit unit;
  EXPECT_FALSE(ParseUnit("SECOND", &unit));
  EXPECT_FALSE(ParseUnit("", &unit));
  EXPECT_EQ(UnitNs(Unit::kMicroseconds), 1000);
  EXPECT_EQ(UnitNs(Unit::kHours), 3600 * kS);
}

}  // namespace
}  // namespace lua_tasks
