// SPDX-License-Identifier: MIT
// Cron schedule: next-time tables with dates and zones written out, DST gaps and overlaps included.
#include "core/cron/cron_schedule.hpp"

#include <date/tz.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace lua_tasks {
namespace {

// "2024-03-10T01:59:59-05:00" or "...Z" to epoch seconds.
int64_t At(const std::string& iso) {
  int y, mo, d, h, mi, s, n = 0;
  if (std::sscanf(iso.c_str(), "%d-%d-%dT%d:%d:%d%n", &y, &mo, &d, &h, &mi, &s, &n) != 6) {
    ADD_FAILURE() << "bad time in test: " << iso;
    return 0;
  }
  int64_t offset = 0;
  const std::string zone = iso.substr(n);
  if (zone != "Z") {
    int oh = 0, om = 0;
    if (zone.size() != 6 || std::sscanf(zone.c_str() + 1, "%d:%d", &oh, &om) != 2)
      ADD_FAILURE() << "bad offset in test: " << iso;
    offset = (zone[0] == '-' ? -1 : 1) * (oh * 3600 + om * 60);
  }
  const auto days = date::sys_days(date::year{y} / mo / d).time_since_epoch().count();
  return int64_t{days} * 86400 + h * 3600 + mi * 60 + s - offset;
}

// Epoch seconds to local time with its offset, so a table shows which pass
// of a repeated hour fired.
std::string Show(int64_t t, const date::time_zone* zone) {
  if (!zone) return date::format("%FT%TZ", date::sys_seconds{std::chrono::seconds{t}});
  // The offset comes from ZoneOffset, not date's zoned_time, which has no DST
  // after 2037 (it does not read the tzdata's POSIX footer).
  const int64_t offset = ZoneOffset(zone, t);
  const int64_t a = offset < 0 ? -offset : offset;
  char sign_hh_mm[8];
  std::snprintf(sign_hh_mm, sizeof sign_hh_mm, "%c%02d:%02d", offset < 0 ? '-' : '+', static_cast<int>(a / 3600),
                static_cast<int>(a / 60 % 60));
  return date::format("%FT%T", date::sys_seconds{std::chrono::seconds{t + offset}}) + sign_hh_mm;
}

const date::time_zone* Zone(const char* name) {
  if (!name) return nullptr;
  std::string error;
  const date::time_zone* zone = FindZone(name, &error);
  EXPECT_NE(zone, nullptr) << error;
  return zone;
}

CronExpr Parse(const std::string& text) {
  CronExpr e;
  std::string error;
  EXPECT_TRUE(ParseCron(text, &e, &error)) << text << ": " << error;
  return e;
}

// Follows the schedule from `from`, feeding each result back in, and shows
// each instant in the zone; "none" ends the list.
std::vector<std::string> Run(const std::string& text, const char* zone_name, const std::string& from, size_t count) {
  const CronExpr e = Parse(text);
  const date::time_zone* zone = Zone(zone_name);
  const date::time_zone* shown_in = e.zone ? e.zone : zone;
  std::vector<std::string> out;
  int64_t t = At(from);
  for (size_t i = 0; i < count; ++i) {
    const std::optional<int64_t> next = CronNext(e, t, zone);
    if (!next) {
      out.push_back("none");
      break;
    }
    EXPECT_GT(*next, t) << "not strictly after " << Show(t, shown_in);
    out.push_back(Show(*next, shown_in));
    t = *next;
  }
  return out;
}

struct Row {
  const char* text;
  const char* zone;  // nullptr = UTC
  const char* from;
  std::vector<std::string> expected;
};

void Check(const std::vector<Row>& rows) {
  for (const auto& row : rows) {
    SCOPED_TRACE(std::string(row.text) + " in " + (row.zone ? row.zone : "UTC") + " from " + row.from);
    EXPECT_EQ(Run(row.text, row.zone, row.from, row.expected.size()), row.expected);
  }
}

// ---- plain calendars ------------------------------------------------------------

TEST(CronScheduleTest, BenchExpressionsInUtc) {
  Check({
      {"* * * * * *",
       nullptr,
       "2024-12-31T23:59:58Z",
       {"2024-12-31T23:59:59Z", "2025-01-01T00:00:00Z", "2025-01-01T00:00:01Z"}},
      {"0 0 12 ? * MON-FRI",
       nullptr,
       "2024-03-01T12:00:00Z",  // a Friday
       {"2024-03-04T12:00:00Z", "2024-03-05T12:00:00Z"}},
      {"0 15 10 L * ?",
       nullptr,
       "2024-01-31T10:15:00Z",
       {"2024-02-29T10:15:00Z", "2024-03-31T10:15:00Z", "2024-04-30T10:15:00Z"}},
      {"0 0 0 29 2 ?", nullptr, "2024-02-29T00:00:00Z", {"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
      {"0 0/5 14,18 * * ?",
       nullptr,
       "2024-01-01T14:50:00Z",
       {"2024-01-01T14:55:00Z", "2024-01-01T18:00:00Z", "2024-01-01T18:05:00Z"}},
  });
}

// cron.next and UNTIL_NEXT default to this zone.
TEST(CronScheduleTest, ProcessZoneReadsTzNowElseTheSystemZone) {
  const char* saved = std::getenv("TZ");
  const std::string old = saved != nullptr ? saved : "";
  setenv("TZ", "Asia/Tokyo", 1);
  ASSERT_NE(ProcessZone(), nullptr);
  EXPECT_EQ(ProcessZone()->name(), "Asia/Tokyo");
  setenv("TZ", ":America/New_York", 1);  // the glibc spelling with a colon
  EXPECT_EQ(ProcessZone()->name(), "America/New_York");
  setenv("TZ", "Not/AZone", 1);  // not a zone: the system's, whatever it is
  const date::time_zone* fallback = ProcessZone();
  unsetenv("TZ");
  EXPECT_EQ(fallback, ProcessZone());
  if (saved != nullptr) setenv("TZ", old.c_str(), 1);
}

TEST(CronScheduleTest, NextIsStrictlyAfterFrom) {
  const CronExpr e = Parse("0 0 12 * * ?");
  EXPECT_EQ(CronNext(e, At("2024-01-01T12:00:00Z"), nullptr), At("2024-01-02T12:00:00Z"));
  EXPECT_EQ(CronNext(e, At("2024-01-01T11:59:59Z"), nullptr), At("2024-01-01T12:00:00Z"));
}

TEST(CronScheduleTest, LeapDayWaitsForTheNextLeapYearAnd2100IsNotOne) {
  Check({
      {"0 0 0 29 2 ?", nullptr, "2097-01-01T00:00:00Z", {"2104-02-29T00:00:00Z", "2108-02-29T00:00:00Z"}},
      {"0 0 29 2 *", nullptr, "2096-02-29T00:00:00Z", {"2104-02-29T00:00:00Z"}},
      {"0 0 0 29 2 ?",
       "America/New_York",
       "2024-03-01T00:00:00-05:00",
       {"2028-02-29T00:00:00-05:00", "2032-02-29T00:00:00-05:00"}},
      {"0 0 0 L 2 ?", nullptr, "2099-03-01T00:00:00Z", {"2100-02-28T00:00:00Z", "2101-02-28T00:00:00Z"}},
  });
}

TEST(CronScheduleTest, ImpossibleDatesAndExhaustedYearsHaveNoNextTime) {
  Check({
      {"0 0 0 30 2 ?", nullptr, "2024-01-01T00:00:00Z", {"none"}},
      {"0 0 0 31 4 ?", nullptr, "2024-01-01T00:00:00Z", {"none"}},
      {"0 0 0 31 2,4,6,9,11 ?", nullptr, "2024-01-01T00:00:00Z", {"none"}},
      {"0 0 30 2 *", nullptr, "2024-01-01T00:00:00Z", {"none"}},
      {"0 0 0 30 2 ?", "America/New_York", "2024-01-01T00:00:00Z", {"none"}},
      {"0 0 0 29 2 ? 2100", nullptr, "1970-01-01T00:00:00Z", {"none"}},
      {"0 0 0 1 1 ? 2020-2022", nullptr, "2021-06-01T00:00:00Z", {"2022-01-01T00:00:00Z", "none"}},
      {"0 0 0 1 1 ? 2030", nullptr, "2030-01-01T00:00:00Z", {"none"}},
      {"0 0 0 1 1 ? 2030", nullptr, "1999-05-05T00:00:00Z", {"2030-01-01T00:00:00Z", "none"}},
      {"0 0 0 ? 2 2#5 2025-2027", nullptr, "2024-01-01T00:00:00Z", {"none"}},
      // A fifth Monday in February needs a leap year starting Feb on a Monday.
      {"0 0 0 ? 2 2#5", nullptr, "2024-01-01T00:00:00Z", {"2044-02-29T00:00:00Z", "2072-02-29T00:00:00Z"}},
  });
}

TEST(CronScheduleTest, SearchStopsAtTheYearsAndTheCalendarEnd) {
  const CronExpr every = Parse("* * * * * *");
  EXPECT_EQ(CronNext(every, At("9999-12-31T23:59:58Z"), nullptr), At("9999-12-31T23:59:59Z"));
  EXPECT_EQ(CronNext(every, At("9999-12-31T23:59:59Z"), nullptr), std::nullopt);
  EXPECT_EQ(CronNext(every, INT64_MAX, nullptr), std::nullopt);
  // Before the year 1 the search starts at the year 1.
  EXPECT_EQ(CronNext(every, INT64_MIN, nullptr), At("0001-01-01T00:00:00Z"));
  EXPECT_EQ(CronNext(Parse("0 0 0 1 1 ?"), At("1900-06-01T00:00:00Z"), nullptr), At("1901-01-01T00:00:00Z"));
  EXPECT_EQ(CronNext(Parse("0 0 0 1 1 ? 1970"), INT64_MIN, nullptr), 0);
  // West of UTC, local 9999-12-31 runs into UTC year 10000, where no search
  // starts: an instant there had no instant before it (fuzz: CronNext of
  // next - 1 was none). The search ends at 9999-12-31T23:59:59Z in every zone.
  const date::time_zone* santiago = Zone("America/Santiago");
  const CronExpr at3 = Parse("7-2 3 * * * *");
  EXPECT_EQ(CronNext(at3, At("9999-12-31T23:59:57Z"), santiago), std::nullopt);
  const std::optional<int64_t> last = CronNext(at3, At("9999-12-31T20:00:00Z"), santiago);
  ASSERT_TRUE(last.has_value());
  EXPECT_LE(*last, At("9999-12-31T23:59:59Z"));
  EXPECT_EQ(CronNext(at3, *last - 1, santiago), last);
}

// ---- day specials ----------------------------------------------------------------

TEST(CronScheduleTest, WeekdayNearestStaysInsideTheMonth) {
  Check({
      // 2024-06-01 is a Saturday: 1W is Monday the 3rd, not Friday May 31.
      {"0 0 0 1W * ?", nullptr, "2024-05-15T00:00:00Z", {"2024-06-03T00:00:00Z", "2024-07-01T00:00:00Z"}},
      // 2024-06-15 is a Saturday -> Friday 14th; 2024-09-15 a Sunday -> Monday 16th.
      {"0 0 0 15W 6,9 ?", nullptr, "2024-01-01T00:00:00Z", {"2024-06-14T00:00:00Z", "2024-09-16T00:00:00Z"}},
      // 2024-03-31 is a Sunday: LW is Friday the 29th. 2024-08-31 is a Saturday -> 30th.
      {"0 0 0 LW 3,8 ?", nullptr, "2024-01-01T00:00:00Z", {"2024-03-29T00:00:00Z", "2024-08-30T00:00:00Z"}},
      // 2024-06-30 is a Sunday and the last day: 30W goes back to Friday 28th.
      {"0 0 0 30W 6 ?", nullptr, "2024-01-01T00:00:00Z", {"2024-06-28T00:00:00Z"}},
      // 31W skips the months without a 31st.
      {"0 0 0 31W * ?", nullptr, "2024-03-31T12:00:00Z", {"2024-05-31T00:00:00Z", "2024-07-31T00:00:00Z"}},
      // L-3W: 2024-07-28 is a Sunday -> Monday 29th.
      {"0 0 0 L-3W 7 ?", nullptr, "2024-01-01T00:00:00Z", {"2024-07-29T00:00:00Z"}},
  });
}

TEST(CronScheduleTest, LastDaysAndNthWeekdays) {
  Check({
      {"0 0 0 L-2 * ?",
       nullptr,
       "2024-02-01T00:00:00Z",
       {"2024-02-27T00:00:00Z", "2024-03-29T00:00:00Z", "2024-04-28T00:00:00Z"}},
      {"0 0 0 L-30 * ?",
       nullptr,
       "2023-12-31T12:00:00Z",  // only months with 31 days
       {"2024-01-01T00:00:00Z", "2024-03-01T00:00:00Z"}},
      // 6L: the last Friday (Quartz 6 = FRI).
      {"0 0 0 ? * 6L",
       nullptr,
       "2024-01-01T00:00:00Z",
       {"2024-01-26T00:00:00Z", "2024-02-23T00:00:00Z", "2024-03-29T00:00:00Z"}},
      {"0 0 0 ? * SUNL", nullptr, "2024-01-01T00:00:00Z", {"2024-01-28T00:00:00Z"}},
      // 2#5: the fifth Monday; Feb and Mar 2024 have none.
      {"0 0 0 ? * 2#5",
       nullptr,
       "2024-01-30T00:00:00Z",
       {"2024-04-29T00:00:00Z", "2024-07-29T00:00:00Z", "2024-09-30T00:00:00Z"}},
      {"0 0 0 ? * FRI#1,FRI#3",
       nullptr,
       "2024-03-01T00:00:00Z",
       {"2024-03-15T00:00:00Z", "2024-04-05T00:00:00Z", "2024-04-19T00:00:00Z"}},
      {"0 0 0 ? * L",
       nullptr,
       "2024-01-01T00:00:00Z",  // a bare L is SAT
       {"2024-01-06T00:00:00Z", "2024-01-13T00:00:00Z"}},
  });
}

TEST(CronScheduleTest, SundayIsOneInQuartzAndZeroOrSevenInVixie) {
  // 2024-01-01 is a Monday.
  Check({
      {"0 0 0 ? * 1", nullptr, "2024-01-01T00:00:00Z", {"2024-01-07T00:00:00Z"}},
      {"0 0 0 ? * SUN", nullptr, "2024-01-01T00:00:00Z", {"2024-01-07T00:00:00Z"}},
      {"0 0 0 ? * 2", nullptr, "2024-01-01T00:00:00Z", {"2024-01-08T00:00:00Z"}},
      {"0 0 * * 0", nullptr, "2024-01-01T00:00:00Z", {"2024-01-07T00:00:00Z"}},
      {"0 0 * * 7", nullptr, "2024-01-01T00:00:00Z", {"2024-01-07T00:00:00Z"}},
      {"0 0 * * SUN", nullptr, "2024-01-01T00:00:00Z", {"2024-01-07T00:00:00Z"}},
      {"0 0 * * 1", nullptr, "2024-01-01T00:00:00Z", {"2024-01-08T00:00:00Z"}},
  });
}

TEST(CronScheduleTest, VixieDayFieldsOrUnlessOneBeginsWithStar) {
  // October 2024: Fridays are 4, 11, 18, 25; the 13th is a Sunday.
  Check({
      {"0 0 13 * 5",
       nullptr,
       "2024-10-01T00:00:00Z",
       {"2024-10-04T00:00:00Z", "2024-10-11T00:00:00Z", "2024-10-13T00:00:00Z", "2024-10-18T00:00:00Z"}},
      {"0 0 13 * *", nullptr, "2024-10-01T00:00:00Z", {"2024-10-13T00:00:00Z", "2024-11-13T00:00:00Z"}},
      {"0 0 * * 5", nullptr, "2024-10-01T00:00:00Z", {"2024-10-04T00:00:00Z", "2024-10-11T00:00:00Z"}},
      // */2 begins with '*': AND, so odd-numbered days that are Fridays.
      {"0 0 */2 * 5",
       nullptr,
       "2024-10-01T00:00:00Z",
       {"2024-10-11T00:00:00Z", "2024-10-25T00:00:00Z", "2024-11-01T00:00:00Z"}},
      {"0 0 13 * */7",
       nullptr,
       "2024-10-01T00:00:00Z",  // SUN only, ANDed
       {"2024-10-13T00:00:00Z", "2025-04-13T00:00:00Z"}},
      // Quartz never ORs: '*' beside a restriction is just every day.
      {"0 0 0 13 * *", nullptr, "2024-10-01T00:00:00Z", {"2024-10-13T00:00:00Z"}},
  });
}

TEST(CronScheduleTest, StepsRestartEachPeriod) {
  Check({
      {"*/7 * * * * ?",
       nullptr,
       "2024-01-01T00:00:55Z",
       {"2024-01-01T00:00:56Z", "2024-01-01T00:01:00Z", "2024-01-01T00:01:07Z"}},
      {"0 0 */5 * * ?", nullptr, "2024-01-01T19:00:00Z", {"2024-01-01T20:00:00Z", "2024-01-02T00:00:00Z"}},
      {"0 0 0 */10 * ?",
       nullptr,
       "2024-02-15T00:00:00Z",
       {"2024-02-21T00:00:00Z", "2024-03-01T00:00:00Z", "2024-03-11T00:00:00Z"}},
      {"0 0 0 1 */5 ?", nullptr, "2024-07-01T00:00:00Z", {"2024-11-01T00:00:00Z", "2025-01-01T00:00:00Z"}},
  });
}

TEST(CronScheduleTest, WrappingRangesAndStepsAfterNames) {
  Check({
      {"0 0 22-2 * * ?",
       nullptr,
       "2024-01-01T21:00:00Z",
       {"2024-01-01T22:00:00Z", "2024-01-01T23:00:00Z", "2024-01-02T00:00:00Z", "2024-01-02T01:00:00Z",
        "2024-01-02T02:00:00Z", "2024-01-02T22:00:00Z"}},
      {"0 0 0 1 NOV-FEB ?",
       nullptr,
       "2024-03-01T00:00:00Z",
       {"2024-11-01T00:00:00Z", "2024-12-01T00:00:00Z", "2025-01-01T00:00:00Z", "2025-02-01T00:00:00Z",
        "2025-11-01T00:00:00Z"}},
      // MON-FRI/2 is MON, WED, FRI in both dialects. 2024-01-01 is a Monday.
      {"0 0 0 ? * MON-FRI/2",
       nullptr,
       "2024-01-01T00:00:00Z",
       {"2024-01-03T00:00:00Z", "2024-01-05T00:00:00Z", "2024-01-08T00:00:00Z"}},
      {"0 0 * * MON-FRI/2",
       nullptr,
       "2024-01-01T00:00:00Z",
       {"2024-01-03T00:00:00Z", "2024-01-05T00:00:00Z", "2024-01-08T00:00:00Z"}},
      {"0 0 * * FRI-MON",
       nullptr,
       "2024-01-02T00:00:00Z",
       {"2024-01-05T00:00:00Z", "2024-01-06T00:00:00Z", "2024-01-07T00:00:00Z", "2024-01-08T00:00:00Z",
        "2024-01-12T00:00:00Z"}},
      {"0 0 0 1 1 ? 2030/10", nullptr, "2024-01-01T00:00:00Z", {"2030-01-01T00:00:00Z", "2040-01-01T00:00:00Z"}},
  });
}

TEST(CronScheduleTest, NicknamesFire) {
  Check({
      {"@yearly", nullptr, "2024-06-01T00:00:00Z", {"2025-01-01T00:00:00Z"}},
      {"@annually", nullptr, "2024-06-01T00:00:00Z", {"2025-01-01T00:00:00Z"}},
      {"@monthly", nullptr, "2024-06-01T00:00:00Z", {"2024-07-01T00:00:00Z"}},
      {"@weekly", nullptr, "2024-06-01T00:00:00Z", {"2024-06-02T00:00:00Z"}},  // a Sunday
      {"@daily", nullptr, "2024-06-01T00:00:00Z", {"2024-06-02T00:00:00Z"}},
      {"@midnight", nullptr, "2024-06-01T00:00:00Z", {"2024-06-02T00:00:00Z"}},
      {"@hourly", nullptr, "2024-06-01T00:00:00Z", {"2024-06-01T01:00:00Z"}},
  });
}

// ---- zones and DST -----------------------------------------------------------------

TEST(CronScheduleTest, ZonePrefixWinsOverTheZoneArgument) {
  Check({
      {"CRON_TZ=Asia/Tokyo 0 0 9 * * ?", nullptr, "2024-01-01T00:00:00Z", {"2024-01-02T09:00:00+09:00"}},
      {"TZ=Asia/Tokyo 0 9 * * *", "America/New_York", "2024-01-01T00:00:00Z", {"2024-01-02T09:00:00+09:00"}},
      {"0 0 9 * * ?", "Asia/Tokyo", "2024-01-01T00:00:00Z", {"2024-01-02T09:00:00+09:00"}},
  });
}

TEST(CronScheduleTest, FixedTimeInASpringForwardGapFiresOnceRightAfterIt) {
  // America/New_York 2024-03-10: 02:00 EST jumps to 03:00 EDT.
  Check({
      {"0 30 2 * * ?",
       "America/New_York",
       "2024-03-09T12:00:00-05:00",
       {"2024-03-10T03:00:00-04:00", "2024-03-11T02:30:00-04:00"}},
      {"30 2 * * *",
       "America/New_York",
       "2024-03-09T12:00:00-05:00",
       {"2024-03-10T03:00:00-04:00", "2024-03-11T02:30:00-04:00"}},
      // Two fixed times in the same gap still fire once.
      {"0 15,45 2 * * ?",
       "America/New_York",
       "2024-03-10T00:00:00-05:00",
       {"2024-03-10T03:00:00-04:00", "2024-03-11T02:15:00-04:00"}},
      // A fixed time in the gap and one at its end: once, not twice in a second.
      {"0 0 2,3 * * ?",
       "America/New_York",
       "2024-03-10T00:00:00-05:00",
       {"2024-03-10T03:00:00-04:00", "2024-03-11T02:00:00-04:00"}},
      // From exactly the end of the gap: already fired.
      {"0 30 2 * * ?", "America/New_York", "2024-03-10T03:00:00-04:00", {"2024-03-11T02:30:00-04:00"}},
      // Europe/London 2024-03-31: 01:00 GMT jumps to 02:00 BST.
      {"0 30 1 * * ?",
       "Europe/London",
       "2024-03-30T12:00:00+00:00",
       {"2024-03-31T02:00:00+01:00", "2024-04-01T01:30:00+01:00"}},
  });
}

TEST(CronScheduleTest, IntervalJobsSkipTheMissingHour) {
  Check({
      {"0 */30 * * * ?",
       "America/New_York",
       "2024-03-10T01:00:00-05:00",
       {"2024-03-10T01:30:00-05:00", "2024-03-10T03:00:00-04:00", "2024-03-10T03:30:00-04:00"}},
      {"0 0 1-3 * * ?",
       "America/New_York",
       "2024-03-10T00:00:00-05:00",
       {"2024-03-10T01:00:00-05:00", "2024-03-10T03:00:00-04:00", "2024-03-11T01:00:00-04:00"}},
      {"0 0 * * * ?",
       "America/New_York",
       "2024-03-10T00:30:00-05:00",
       {"2024-03-10T01:00:00-05:00", "2024-03-10T03:00:00-04:00"}},
      {"0 */20 2 * * ?", "America/New_York", "2024-03-09T23:00:00-05:00", {"2024-03-11T02:00:00-04:00"}},
      {"30 * * * *",
       "America/New_York",
       "2024-03-10T01:00:00-05:00",
       {"2024-03-10T01:30:00-05:00", "2024-03-10T03:30:00-04:00"}},
  });
}

TEST(CronScheduleTest, MidnightThatDoesNotExist) {
  Check({
      // America/Sao_Paulo 2018-11-04: 00:00 -03 jumps to 01:00 -02.
      {"0 0 0 * * ?",
       "America/Sao_Paulo",
       "2018-11-03T12:00:00-03:00",
       {"2018-11-04T01:00:00-02:00", "2018-11-05T00:00:00-02:00"}},
      {"@daily",
       "America/Sao_Paulo",
       "2018-11-03T12:00:00-03:00",
       {"2018-11-04T01:00:00-02:00", "2018-11-05T00:00:00-02:00"}},
      {"0 0 0 4 11 ?",
       "America/Sao_Paulo",
       "2018-01-01T00:00:00-02:00",
       {"2018-11-04T01:00:00-02:00", "2019-11-04T00:00:00-03:00"}},
      {"0 */30 * * * ?",
       "America/Sao_Paulo",
       "2018-11-03T23:00:00-03:00",
       {"2018-11-03T23:30:00-03:00", "2018-11-04T01:00:00-02:00", "2018-11-04T01:30:00-02:00"}},
      // America/Santiago 2023-09-03: 00:00 -04 jumps to 01:00 -03.
      {"0 0 0 * * ?",
       "America/Santiago",
       "2023-09-01T12:00:00-04:00",
       {"2023-09-02T00:00:00-04:00", "2023-09-03T01:00:00-03:00", "2023-09-04T00:00:00-03:00"}},
      {"0 0 * * * ?",
       "America/Santiago",
       "2023-09-02T22:30:00-04:00",
       {"2023-09-02T23:00:00-04:00", "2023-09-03T01:00:00-03:00"}},
  });
}

// America/New_York 2024-11-03: 02:00 EDT falls back to 01:00 EST.
TEST(CronScheduleTest, FallBackHourFiresFixedTimesOnceAndIntervalsInBothPasses) {
  Check({
      {"0 30 1 * * ?",
       "America/New_York",
       "2024-11-03T00:00:00-04:00",
       {"2024-11-03T01:30:00-04:00", "2024-11-04T01:30:00-05:00"}},
      {"30 1 * * *",
       "America/New_York",
       "2024-11-03T00:00:00-04:00",
       {"2024-11-03T01:30:00-04:00", "2024-11-04T01:30:00-05:00"}},
      // From inside either pass, the next is tomorrow.
      {"0 30 1 * * ?", "America/New_York", "2024-11-03T01:45:00-04:00", {"2024-11-04T01:30:00-05:00"}},
      {"0 30 1 * * ?", "America/New_York", "2024-11-03T01:15:00-05:00", {"2024-11-04T01:30:00-05:00"}},
      // Intervals fire in both passes, in instant order.
      {"0 */30 1 * * ?",
       "America/New_York",
       "2024-11-03T00:59:59-04:00",
       {"2024-11-03T01:00:00-04:00", "2024-11-03T01:30:00-04:00", "2024-11-03T01:00:00-05:00",
        "2024-11-03T01:30:00-05:00", "2024-11-04T01:00:00-05:00"}},
      {"0 0 * * * ?",
       "America/New_York",
       "2024-11-02T23:30:00-04:00",
       {"2024-11-03T00:00:00-04:00", "2024-11-03T01:00:00-04:00", "2024-11-03T01:00:00-05:00",
        "2024-11-03T02:00:00-05:00"}},
      {"0 0 1-2 * * ?",
       "America/New_York",
       "2024-11-03T00:00:00-04:00",
       {"2024-11-03T01:00:00-04:00", "2024-11-03T01:00:00-05:00", "2024-11-03T02:00:00-05:00"}},
      // America/Santiago 2023-04-02: 00:00 -03 falls back to 23:00 -04 on the 1st.
      {"0 30 23 * * ?",
       "America/Santiago",
       "2023-04-01T12:00:00-03:00",
       {"2023-04-01T23:30:00-03:00", "2023-04-02T23:30:00-04:00"}},
      {"0 30 * * * ?",
       "America/Santiago",
       "2023-04-01T22:45:00-03:00",
       {"2023-04-01T23:30:00-03:00", "2023-04-01T23:30:00-04:00", "2023-04-02T00:30:00-04:00"}},
      // Europe/London 2024-10-27: 02:00 BST falls back to 01:00 GMT.
      {"0 0 1 * * ?",
       "Europe/London",
       "2024-10-26T12:00:00+01:00",
       {"2024-10-27T01:00:00+01:00", "2024-10-28T01:00:00+00:00"}},
  });
}

// Debian's tzdata lists transitions up to 2037; later ones come from the
// zone's POSIX rule (checked against Python's zoneinfo).
TEST(CronScheduleTest, DstContinuesAfter2037) {
  Check({
      {"0 0 12 1 * ?",
       "America/New_York",
       "2039-12-15T00:00:00-05:00",
       {"2040-01-01T12:00:00-05:00", "2040-02-01T12:00:00-05:00", "2040-03-01T12:00:00-05:00",
        "2040-04-01T12:00:00-04:00"}},
      {"0 30 2 * * ?",
       "America/New_York",
       "2040-03-10T12:00:00Z",
       {"2040-03-11T03:00:00-04:00", "2040-03-12T02:30:00-04:00"}},
      {"0 */30 1 * * ?",
       "America/New_York",
       "2040-11-04T00:50:00-04:00",
       {"2040-11-04T01:00:00-04:00", "2040-11-04T01:30:00-04:00", "2040-11-04T01:00:00-05:00",
        "2040-11-04T01:30:00-05:00", "2040-11-05T01:00:00-05:00"}},
      {"0 30 1 * * ?",
       "America/New_York",
       "2040-11-04T00:50:00-04:00",
       {"2040-11-04T01:30:00-04:00", "2040-11-05T01:30:00-05:00"}},
      // America/Santiago 2040-09-02: 00:00 -04 jumps to 01:00 -03 (rule M9.1.6/24).
      {"0 0 0 * * ?",
       "America/Santiago",
       "2040-09-01T12:00:00-04:00",
       {"2040-09-02T01:00:00-03:00", "2040-09-03T00:00:00-03:00"}},
      // Australia/Lord_Howe 2040-10-07: 02:00 +10:30 jumps half an hour to 02:30 +11:00.
      {"0 15 2 * * ?",
       "Australia/Lord_Howe",
       "2040-10-06T12:00:00+10:30",
       {"2040-10-07T02:30:00+11:00", "2040-10-08T02:15:00+11:00"}},
      {"0 0/15 2 * * ?",
       "Australia/Lord_Howe",
       "2040-10-07T01:50:00+10:30",
       {"2040-10-07T02:30:00+11:00", "2040-10-07T02:45:00+11:00"}},
      {"0 0 9 * * ?", "Asia/Tokyo", "2050-05-31T12:00:00Z", {"2050-06-01T09:00:00+09:00"}},
  });
  const date::time_zone* ny = Zone("America/New_York");
  EXPECT_EQ(ZoneOffset(ny, At("2040-07-01T12:00:00Z")), -4 * 3600);
  EXPECT_EQ(ZoneOffset(ny, At("2040-12-01T12:00:00Z")), -5 * 3600);
  EXPECT_EQ(ZoneOffset(ny, At("2199-07-01T12:00:00Z")), -4 * 3600);
  EXPECT_EQ(ZoneOffset(nullptr, At("2040-07-01T12:00:00Z")), 0);
}

TEST(CronScheduleTest, NeverFiresTwiceInTheSameSecond) {
  // Walk a whole year of DST changes in several zones, feeding results back.
  const char* exprs[] = {"0 0 2,3 * * ?", "0 30 1 * * ?", "0 */15 * * * ?", "0 0 0 * * ?", "@hourly", "0 0 1-3 * * ?"};
  const char* zones[] = {"America/New_York", "Europe/London", "America/Sao_Paulo", "America/Santiago",
                         "Australia/Lord_Howe"};
  const char* years[][2] = {{"2018-01-01T00:00:00Z", "2019-01-01T00:00:00Z"},
                            {"2040-01-01T00:00:00Z", "2041-01-01T00:00:00Z"}};
  for (const char* text : exprs) {
    const CronExpr e = Parse(text);
    for (const char* name : zones) {
      for (const auto& year : years) {
        const date::time_zone* zone = Zone(name);
        int64_t t = At(year[0]);
        const int64_t end = At(year[1]);
        int guard = 0;
        while (t < end && ++guard < 100000) {
          const std::optional<int64_t> next = CronNext(e, t, zone);
          ASSERT_TRUE(next.has_value()) << text << " " << name;
          ASSERT_GT(*next, t) << text << " in " << name << " after " << Show(t, zone);
          t = *next;
        }
      }
    }
  }
}

TEST(CronScheduleTest, LocalTimesAreClassified) {
  const date::time_zone* ny = Zone("America/New_York");
  auto local = [](const char* s) { return At(std::string(s) + "Z"); };  // wall clock as if UTC
  EXPECT_EQ(ClassifyLocalTime(ny, local("2024-03-10T01:59:59")), LocalTimeKind::kNormal);
  EXPECT_EQ(ClassifyLocalTime(ny, local("2024-03-10T02:30:00")), LocalTimeKind::kNonexistent);
  EXPECT_EQ(ClassifyLocalTime(ny, local("2024-03-10T03:00:00")), LocalTimeKind::kNormal);
  EXPECT_EQ(ClassifyLocalTime(ny, local("2024-11-03T01:30:00")), LocalTimeKind::kAmbiguous);
  EXPECT_EQ(ClassifyLocalTime(ny, local("2024-11-03T02:00:00")), LocalTimeKind::kNormal);
  EXPECT_EQ(ClassifyLocalTime(Zone("America/Sao_Paulo"), local("2018-11-04T00:00:00")), LocalTimeKind::kNonexistent);
  EXPECT_EQ(ClassifyLocalTime(nullptr, local("2024-03-10T02:30:00")), LocalTimeKind::kNormal);
  EXPECT_EQ(ClassifyLocalTime(ny, local("2040-03-11T02:30:00")), LocalTimeKind::kNonexistent);
  EXPECT_EQ(ClassifyLocalTime(ny, local("2040-11-04T01:30:00")), LocalTimeKind::kAmbiguous);
  EXPECT_EQ(ClassifyLocalTime(ny, local("2040-07-04T12:00:00")), LocalTimeKind::kNormal);
  EXPECT_EQ(ClassifyLocalTime(Zone("Australia/Lord_Howe"), local("2040-10-07T02:15:00")), LocalTimeKind::kNonexistent);
}

TEST(CronScheduleTest, UnknownZonesAreErrors) {
  std::string error;
  EXPECT_EQ(FindZone("Mars/Olympus_Mons", &error), nullptr);
  EXPECT_EQ(error,
            "cron: unknown time zone: 'Mars/Olympus_Mons' (allowed an IANA zone name such as "
            "Europe/Paris)");
  EXPECT_EQ(FindZone("", &error), nullptr);
  EXPECT_EQ(error, "cron: unknown time zone: '' (allowed an IANA zone name such as Europe/Paris)");
  EXPECT_EQ(FindZone("../../etc/passwd", &error), nullptr);
  EXPECT_NE(FindZone("UTC", &error), nullptr);
  EXPECT_EQ(FindZone("Europe/Paris", &error), FindZone("Europe/Paris", &error));
}

}  // namespace
}  // namespace lua_tasks
