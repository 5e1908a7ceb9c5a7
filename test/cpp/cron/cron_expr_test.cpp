// SPDX-License-Identifier: MIT
// Cron expressions: parse tables for both dialects, the expanded fields, and every error message.
#include "core/cron/cron_expr.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace lua_tasks {
namespace {

using Ints = std::vector<int>;

CronDescription Describe(const std::string& text) {
  CronExpr e;
  std::string error;
  EXPECT_TRUE(ParseCron(text, &e, &error)) << text << ": " << error;
  return DescribeCron(e);
}

// ---- field expansion ---------------------------------------------------------

struct FieldRow {
  const char* text;
  const char* field;  // which CronDescription vector to compare
  Ints expected;
};

const Ints& Pick(const CronDescription& d, std::string_view field) {
  if (field == "seconds") return d.seconds;
  if (field == "minutes") return d.minutes;
  if (field == "hours") return d.hours;
  if (field == "dom") return d.days_of_month;
  if (field == "months") return d.months;
  if (field == "dow") return d.days_of_week;
  return d.years;
}

Ints Seq(int lo, int hi, int step = 1) {
  Ints v;
  for (int i = lo; i <= hi; i += step) v.push_back(i);
  return v;
}

TEST(CronExprTest, FieldsExpandToTheValuesTheTextNames) {
  const FieldRow rows[] = {
      {"* * * * * *", "seconds", Seq(0, 59)},
      {"*/7 * * * * ?", "seconds", {0, 7, 14, 21, 28, 35, 42, 49, 56}},
      {"5/15 * * * * ?", "seconds", {5, 20, 35, 50}},
      {"10-20/5 * * * * ?", "seconds", {10, 15, 20}},
      {"50-10/5 * * * * ?", "seconds", {0, 5, 10, 50, 55}},  // wraps through 59
      {"1,3,5,3 * * * * ?", "seconds", {1, 3, 5}},
      {"0 0/20 * * * ?", "minutes", {0, 20, 40}},
      {"0 0 22-2 * * ?", "hours", {0, 1, 2, 22, 23}},
      {"0 0 */5 * * ?", "hours", {0, 5, 10, 15, 20}},
      {"0 0 0 */10 * ?", "dom", {1, 11, 21, 31}},
      {"0 0 0 25-5 * ?", "dom", {1, 2, 3, 4, 5, 25, 26, 27, 28, 29, 30, 31}},
      {"0 0 0 ? NOV-FEB *", "months", {1, 2, 11, 12}},
      {"0 0 0 ? jan,Mar,DEC *", "months", {1, 3, 12}},
      {"0 0 0 ? */4 *", "months", {1, 5, 9}},
      // Quartz day-of-week: 1 = SUN .. 7 = SAT; stored as 0 = SUN.
      {"0 0 0 ? * 1", "dow", {0}},
      {"0 0 0 ? * 7", "dow", {6}},
      {"0 0 0 ? * MON-FRI", "dow", {1, 2, 3, 4, 5}},
      {"0 0 0 ? * MON-FRI/2", "dow", {1, 3, 5}},  // MON, WED, FRI
      {"0 0 0 ? * FRI-MON", "dow", {0, 1, 5, 6}},
      {"0 0 0 ? * */2", "dow", {0, 2, 4, 6}},  // 1,3,5,7 = SUN,TUE,THU,SAT
      {"0 0 0 ? * L", "dow", {6}},             // a bare L is SAT
      // Vixie day-of-week: 0 and 7 = SUN.
      {"0 0 * * 0", "dow", {0}},
      {"0 0 * * 7", "dow", {0}},
      {"0 0 * * 1", "dow", {1}},
      {"0 0 * * 0-7", "dow", Seq(0, 6)},
      {"0 0 * * 5-7", "dow", {0, 5, 6}},
      {"0 0 * * 5-1", "dow", {0, 1, 5, 6}},
      {"0 0 * * 7-2", "dow", {0, 1, 2}},  // 7 is SUN, so this runs SUN-TUE
      {"0 0 * * SAT-SUN", "dow", {0, 6}},
      {"0 0 * * MON-FRI/2", "dow", {1, 3, 5}},
      {"0 0 * * */2", "dow", {0, 2, 4, 6}},
      {"0 0 0 1 1 ? 2030", "years", {2030}},
      {"0 0 0 1 1 ? 2030/10", "years", Seq(2030, 2190, 10)},
      {"0 0 0 1 1 ? 2024,2020-2022", "years", {2020, 2021, 2022, 2024}},
      {"0 0 0 1 1 ? *", "years", {}},
      {"0 0 0 1 1 ?", "years", {}},
      // Vixie: seconds are always 0.
      {"*/15 * * * *", "seconds", {0}},
      {"*/15 * * * *", "minutes", {0, 15, 30, 45}},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.text);
    EXPECT_EQ(Pick(Describe(row.text), row.field), row.expected) << row.field;
  }
}

TEST(CronExprTest, FieldCountDecidesTheDialect) {
  EXPECT_STREQ(Describe("0 0 * * *").dialect, "vixie");
  EXPECT_STREQ(Describe("0 0 0 * * ?").dialect, "quartz");
  EXPECT_STREQ(Describe("0 0 0 * * ? 2030").dialect, "quartz");
  EXPECT_STREQ(Describe("@daily").dialect, "vixie");
}

TEST(CronExprTest, NicknamesAreVixieLines) {
  struct Row {
    const char* text;
    Ints minutes, hours, dom, months, dow;
  };
  const Row rows[] = {
      {"@yearly", {0}, {0}, {1}, {1}, Seq(0, 6)},
      {"@annually", {0}, {0}, {1}, {1}, Seq(0, 6)},
      {"@monthly", {0}, {0}, {1}, Seq(1, 12), Seq(0, 6)},
      {"@weekly", {0}, {0}, Seq(1, 31), Seq(1, 12), {0}},
      {"@daily", {0}, {0}, Seq(1, 31), Seq(1, 12), Seq(0, 6)},
      {"@midnight", {0}, {0}, Seq(1, 31), Seq(1, 12), Seq(0, 6)},
      {"@hourly", {0}, Seq(0, 23), Seq(1, 31), Seq(1, 12), Seq(0, 6)},
      {"@DAILY", {0}, {0}, Seq(1, 31), Seq(1, 12), Seq(0, 6)},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.text);
    const CronDescription d = Describe(row.text);
    EXPECT_EQ(d.seconds, Ints{0});
    EXPECT_EQ(d.minutes, row.minutes);
    EXPECT_EQ(d.hours, row.hours);
    EXPECT_EQ(d.days_of_month, row.dom);
    EXPECT_EQ(d.months, row.months);
    EXPECT_EQ(d.days_of_week, row.dow);
  }
}

TEST(CronExprTest, QuartzDaySpecialsAreKeptApartFromPlainDays) {
  CronDescription d = Describe("0 0 0 L,L-3,15W,LW,L-2W,1 * ?");
  EXPECT_EQ(d.last_day_offsets, (Ints{0, 3}));
  EXPECT_EQ(d.nearest_weekdays, Ints{15});
  EXPECT_EQ(d.last_weekday_offsets, (Ints{0, 2}));
  EXPECT_EQ(d.days_of_month, Ints{1});
  EXPECT_FALSE(d.every_day_of_month);

  d = Describe("0 0 0 ? * 6L,FRI#3,2#5,sunL");
  EXPECT_EQ(d.last_days_of_week, (Ints{0, 5}));  // SUN and FRI
  EXPECT_EQ(d.nth_days_of_week, (std::vector<std::pair<int, int>>{{1, 5}, {5, 3}}));
  EXPECT_TRUE(d.days_of_week.empty());
  EXPECT_TRUE(d.every_day_of_month);

  d = Describe("0 0 0 l * ?");  // specials are case-insensitive
  EXPECT_EQ(d.last_day_offsets, Ints{0});
  d = Describe("0 0 0 lw * ?");
  EXPECT_EQ(d.last_weekday_offsets, Ints{0});
}

TEST(CronExprTest, VixieOrsTheDayFieldsOnlyWhenNeitherBeginsWithStar) {
  const std::pair<const char*, bool> rows[] = {
      {"0 0 13 * 5", true},    {"0 0 13 * *", false}, {"0 0 * * 5", false},    {"0 0 */2 * 5", false},
      {"0 0 13 * */2", false}, {"0 0 1-7 * 1", true}, {"0 0 0 13 * ?", false},  // Quartz never ORs
  };
  for (const auto& [text, day_or] : rows) EXPECT_EQ(Describe(text).day_or, day_or) << text;
}

TEST(CronExprTest, QuartzAcceptsAPlainStarBesideARestrictedDayField) {
  // Quartz proper wants '?' in one of them; '*' restricts nothing, so there is
  // no ambiguity and the common `* * * * * *` parses.
  EXPECT_TRUE(Describe("* * * * * *").every_day_of_week);
  EXPECT_EQ(Describe("0 0 0 */2 * *").days_of_month, Seq(1, 31, 2));
  const CronDescription d = Describe("0 0 12 * * MON");
  EXPECT_TRUE(d.every_day_of_month);
  EXPECT_EQ(d.days_of_week, Ints{1});
}

// `0 0 9 * * 1-5` is SUN-THU in Quartz and MON-FRI in node-cron and
// croner. Day numbers beside a day-of-month '*' are refused, naming both
// readings and the spellings every dialect reads alike.
TEST(CronExprTest, QuartzRefusesDayNumbersBesideAStarDayOfMonth) {
  const std::pair<std::string, std::string> rows[] = {
      {"0 0 9 * * 1-5",
       "cron: day-of-week '1-5' at position 11 is ambiguous with day-of-month '*': Quartz (6-7 fields) "
       "counts 1 = SUN, node-cron and croner count 1 = MON. Write \"0 0 9 ? * MON-FRI\" (names), or use 5 "
       "fields (\"0 9 * * 1-5\")"},
      {"0 30 8 * 1-6 7,1 *",
       "cron: day-of-week '7,1' at position 14 is ambiguous with day-of-month '*': Quartz (6-7 fields) "
       "counts 1 = SUN, node-cron and croner count 1 = MON. Write \"0 30 8 ? 1-6 SUN,MON *\" (names), or use "
       "5 fields (\"30 8 * 1-6 7,1\")"},
      // seconds, a year or a Quartz-only form: no 5-field spelling
      {"*/10 * * * * 2",
       "cron: day-of-week '2' at position 14 is ambiguous with day-of-month '*': Quartz (6-7 fields) "
       "counts 1 = SUN, node-cron and croner count 1 = MON. Write \"*/10 * * ? * TUE\" (names)"},
      {"0 0 0 * * 5L",
       "cron: day-of-week '5L' at position 11 is ambiguous with day-of-month '*': Quartz (6-7 fields) "
       "counts 1 = SUN, node-cron and croner count 1 = MON. Write \"0 0 0 ? * FRIL\" (names)"},
      {"0 0 0 * * 6#3 2030",
       "cron: day-of-week '6#3' at position 11 is ambiguous with day-of-month '*': Quartz (6-7 fields) "
       "counts 1 = SUN, node-cron and croner count 1 = MON. Write \"0 0 0 ? * SAT#3 2030\" (names)"},
      {"0 0 0 * * MON-FRI,7",
       "cron: day-of-week 'MON-FRI,7' at position 11 is ambiguous with day-of-month '*': Quartz (6-7 "
       "fields) counts 1 = SUN, node-cron and croner count 1 = MON. Write \"0 0 0 ? * MON-FRI,SUN\" (names), "
       "or use 5 fields (\"0 0 * * MON-FRI,7\")"},
      {"0 0 0 * * 2-6/2",
       "cron: day-of-week '2-6/2' at position 11 is ambiguous with day-of-month '*': Quartz (6-7 fields) "
       "counts 1 = SUN, node-cron and croner count 1 = MON. Write \"0 0 0 ? * TUE-SAT/2\" (names), or use 5 "
       "fields (\"0 0 * * 2-6/2\")"},
  };
  for (const auto& [text, message] : rows) {
    CronExpr e;
    std::string error;
    EXPECT_FALSE(ParseCron(text, &e, &error)) << text;
    EXPECT_EQ(error, message) << text;
  }
  // Every suggested names spelling parses, and means what node-cron means.
  EXPECT_EQ(Describe("0 0 9 ? * MON-FRI").days_of_week, Seq(1, 5));
  EXPECT_EQ(Describe("0 0 0 ? * FRIL").last_days_of_week, Ints{5});
  EXPECT_EQ(Describe("0 30 8 ? 1-6 SUN,MON *").days_of_week, (Ints{0, 1}));
  // Unambiguous forms stay accepted: names, '?' beside numbers, '*' or '?'
  // beside '*', numbers only as a step or an occurrence, 5 fields.
  for (const char* text :
       {"0 0 9 * * MON-FRI", "0 0 9 ? * 1-5", "0 0 9 * * ?", "0 0 9 * * *", "0 0 9 ? * *", "0 0 9 * * */2",
        "0 0 9 * * MON/2", "0 0 9 * * FRI#2", "0 0 9 * * L", "0 9 * * 1-5", "0 0 9 1 * ?"}) {
    CronExpr e;
    std::string error;
    EXPECT_TRUE(ParseCron(text, &e, &error)) << text << ": " << error;
  }
}

TEST(CronExprTest, IntervalJobsHaveAStarRangeOrStepInSecondsMinutesOrHours) {
  const std::pair<const char*, bool> rows[] = {
      {"0 30 2 * * ?", false},  {"0 0,30 2 * * ?", false}, {"30 2 * * *", false},   {"@daily", false},
      {"0 0 0 1-5 * ?", false}, {"0 */5 2 * * ?", true},   {"0 0 1-3 * * ?", true}, {"* 0 2 * * ?", true},
      {"0 0 0/6 * * ?", true},  {"0 0 * * * ?", true},     {"@hourly", true},       {"*/10 * * * *", true},
  };
  for (const auto& [text, interval] : rows) EXPECT_EQ(Describe(text).interval, interval) << text;
}

TEST(CronExprTest, ZonePrefixIsParsedAndChecked) {
  CronDescription d = Describe("CRON_TZ=Europe/Paris 0 0 9 * * ?");
  EXPECT_EQ(d.zone, "Europe/Paris");
  EXPECT_EQ(d.hours, Ints{9});
  d = Describe("  TZ=America/New_York\t@daily ");
  EXPECT_EQ(d.zone, "America/New_York");
  EXPECT_EQ(Describe("0 0 * * *").zone, "");
}

TEST(CronExprTest, WhitespaceBetweenFieldsIsFree) {
  EXPECT_EQ(Describe(" \t0  0\t12 ?  *  MON-FRI \n").hours, Ints{12});
}

TEST(CronExprTest, ParsedExpressionIsACopyableValue) {
  CronExpr a;
  std::string error;
  ASSERT_TRUE(ParseCron("CRON_TZ=Asia/Tokyo 0 15 10 L * ?", &a, &error));
  const CronExpr b = a;  // NOLINT: the copy is the point
  EXPECT_EQ(b.zone, a.zone);
  EXPECT_EQ(b.zone_name, "Asia/Tokyo");
  EXPECT_EQ(b.last_minus, a.last_minus);
}

TEST(CronExprTest, FailedParseLeavesTheOutputUntouched) {
  CronExpr e;
  std::string error;
  ASSERT_TRUE(ParseCron("0 0 12 * * ?", &e, &error));
  EXPECT_FALSE(ParseCron("0 0 24 * * ?", &e, &error));
  EXPECT_EQ(DescribeCron(e).hours, Ints{12});
}

// ---- errors --------------------------------------------------------------------

struct ErrorRow {
  std::string text;
  std::string message;
};

TEST(CronExprTest, EveryErrorNamesTheFieldPositionValueAndWhatIsAllowed) {
  const ErrorRow rows[] = {
      // shape of the line (more in ShapeErrorsPointAtTheRightPlace)
      {std::string(1025, '*'), "cron: expression too long: 1025 characters (allowed up to 1024)"},
      {"@reboot",
       "cron: unknown nickname: '@reboot' at position 1 (allowed @yearly @annually @monthly "
       "@weekly @daily @midnight @hourly)"},
      {"@daily 5", "cron: unexpected text after @daily: '5' at position 8 (allowed a nickname alone)"},
      {"CRON_TZ=Mars/Base 0 0 * * *",
       "cron: unknown time zone: 'Mars/Base' at position 9 (allowed an IANA zone name such as "
       "Europe/Paris)"},
      {"CRON_TZ= 0 0 * * *",
       "cron: missing time zone after CRON_TZ= at position 9 (allowed an IANA zone name such as "
       "Europe/Paris)"},
      // ranges
      {"60 * * * * ?", "cron: second out of range: 60 at position 1 (allowed 0-59)"},
      {"0 60 * * * ?", "cron: minute out of range: 60 at position 3 (allowed 0-59)"},
      {"0 0 24 * * ?", "cron: hour out of range: 24 at position 5 (allowed 0-23)"},
      {"0 0 0 32 * ?", "cron: day-of-month out of range: 32 at position 7 (allowed 1-31)"},
      {"0 0 0 0 * ?", "cron: day-of-month out of range: 0 at position 7 (allowed 1-31)"},
      {"0 0 0 ? 13 *", "cron: month out of range: 13 at position 9 (allowed 1-12)"},
      {"0 0 0 ? 0 *", "cron: month out of range: 0 at position 9 (allowed 1-12)"},
      {"0 0 0 ? * 8", "cron: day-of-week out of range: 8 at position 11 (allowed 1-7)"},
      {"0 0 0 ? * 0", "cron: day-of-week out of range: 0 at position 11 (allowed 1-7)"},
      {"0 0 * * 8", "cron: day-of-week out of range: 8 at position 9 (allowed 0-7)"},
      {"0 0 0 1 1 ? 1969", "cron: year out of range: 1969 at position 13 (allowed 1970-2199)"},
      {"0 0 0 1 1 ? 2200", "cron: year out of range: 2200 at position 13 (allowed 1970-2199)"},
      {"0 0 0-99999999999 * * ?", "cron: hour out of range: 99999999999 at position 7 (allowed 0-23)"},
      {"0 0 1-30 * * ?", "cron: hour out of range: 30 at position 7 (allowed 0-23)"},
      // values
      {"x * * * * ?", "cron: second has an invalid value: 'x' at position 1 (allowed 0-59)"},
      {"0 0 0 ? JAX *", "cron: month has an invalid value: 'JAX' at position 9 (allowed 1-12 or JAN-DEC)"},
      {"0 0 0 ? JA *", "cron: month has an invalid value: 'JA' at position 9 (allowed 1-12 or JAN-DEC)"},
      {"0 0 0 ? * FUN",
       "cron: day-of-week has an invalid value: 'FUN' at position 11 (allowed 1-7 or SUN-SAT (1 "
       "= SUN), nL, n#k, L or ?)"},
      {"0 MON * * * ?", "cron: minute has an invalid value: 'MON' at position 3 (allowed 0-59)"},
      {"1- * * * * ?", "cron: second is missing a value at position 3 (allowed 0-59)"},
      {"1-x * * * * ?", "cron: second has an invalid value: 'x' at position 3 (allowed 0-59)"},
      {"-1 * * * * ?", "cron: second has an invalid value: '-1' at position 1 (allowed 0-59)"},
      {"5x * * * * ?", "cron: second has an unexpected character: 'x' at position 2 (allowed 0-59)"},
      {"1,,2 * * * * ?", "cron: second has an empty list item at position 3 (allowed 0-59)"},
      {",1 * * * * ?", "cron: second has an empty list item at position 1 (allowed 0-59)"},
      {"1, * * * * ?", "cron: second has an empty list item at position 3 (allowed 0-59)"},
      {"\x01 * * * * ?", "cron: second has an invalid value: '\\x01' at position 1 (allowed 0-59)"},
      {"*x * * * * ?", "cron: second has an unexpected character: 'x' at position 2 (allowed 0-59)"},
      // steps
      {"*/0 * * * * ?", "cron: second step out of range: 0 at position 3 (allowed 1-59)"},
      {"*/60 * * * * ?", "cron: second step out of range: 60 at position 3 (allowed 1-59)"},
      {"0 0 */24 * * ?", "cron: hour step out of range: 24 at position 7 (allowed 1-23)"},
      {"0 0 0 ? */13 *", "cron: month step out of range: 13 at position 11 (allowed 1-12)"},
      {"0 0 0 ? * */8", "cron: day-of-week step out of range: 8 at position 13 (allowed 1-7)"},
      {"0 0 0 ? * MON-FRI/0", "cron: day-of-week step out of range: 0 at position 19 (allowed 1-7)"},
      {"0 0 0 1 1 ? */230", "cron: year step out of range: 230 at position 15 (allowed 1-229)"},
      {"*/ * * * * ?", "cron: second is missing a step after '/' at position 3 (allowed 1-59)"},
      {"*/x * * * * ?", "cron: second has an invalid step: 'x' at position 3 (allowed 1-59)"},
      {"1/5/5 * * * * ?", "cron: second has an unexpected character: '/' at position 4 (allowed 0-59)"},
      // '?' and the day fields
      {"0 0 0 ? * ?",
       "cron: day-of-month and day-of-week are both '?' at position 11 (allowed '?' in exactly "
       "one of them)"},
      {"0 0 0 1 * MON",
       "cron: day-of-month and day-of-week are both set: '1' and 'MON' at position 11 (allowed "
       "'?' (or '*') in one of them)"},
      {"0 0 ? * * ?",
       "cron: '?' is not allowed in the hour field at position 5 (allowed only in day-of-month or "
       "day-of-week of 6/7-field (quartz) expressions)"},
      {"0 0 0 1,? * *",
       "cron: '?' must stand alone in day-of-month at position 9 (allowed '?' or a list without "
       "it)"},
      {"0 0 ? * *",
       "cron: '?' is not allowed in the day-of-month field at position 5 (allowed only in "
       "day-of-month or day-of-week of 6/7-field (quartz) expressions)"},
      // Quartz specials, and the same in Vixie
      {"0 0 L * *",
       "cron: day-of-month has an invalid value: 'L' at position 5 (allowed 1-31; L, W and ? "
       "need 6 or 7 fields (quartz))"},
      {"0 0 * * 5L",
       "cron: day-of-week has an unexpected character: 'L' at position 10 (allowed 0-7 or SUN-SAT "
       "(0 and 7 = SUN); L, # and ? need 6 or 7 fields (quartz))"},
      {"0 0 0 L-31 * ?", "cron: day-of-month offset out of range: 31 at position 9 (allowed 1-30)"},
      {"0 0 0 L-0 * ?", "cron: day-of-month offset out of range: 0 at position 9 (allowed 1-30)"},
      {"0 0 0 L- * ?",
       "cron: day-of-month is missing a value at position 9 (allowed 1-31, L, L-n, nW, LW, L-nW "
       "or ?)"},
      {"0 0 0 LX * ?",
       "cron: day-of-month has an unexpected character: 'X' at position 8 (allowed 1-31, L, L-n, "
       "nW, LW, L-nW or ?)"},
      {"0 0 0 LWX * ?",
       "cron: day-of-month has an unexpected character: 'X' at position 9 (allowed 1-31, L, L-n, "
       "nW, LW, L-nW or ?)"},
      {"0 0 0 32W * ?", "cron: day-of-month out of range: 32 at position 7 (allowed 1-31)"},
      {"0 0 0 1WW * ?",
       "cron: day-of-month has an unexpected character: 'W' at position 9 (allowed 1-31, L, L-n, "
       "nW, LW, L-nW or ?)"},
      {"0 0 0 L/2 * ?",
       "cron: day-of-month has an unexpected character: '/' at position 8 (allowed 1-31, L, L-n, "
       "nW, LW, L-nW or ?)"},
      {"0 0 0 ? * 6#6", "cron: day-of-week occurrence out of range: 6 at position 13 (allowed 1-5)"},
      {"0 0 0 ? * 6#0", "cron: day-of-week occurrence out of range: 0 at position 13 (allowed 1-5)"},
      {"0 0 0 ? * 6#",
       "cron: day-of-week is missing a value at position 13 (allowed 1-7 or SUN-SAT (1 = SUN), "
       "nL, n#k, L or ?)"},
      {"0 0 0 ? * 6LL",
       "cron: day-of-week has an unexpected character: 'L' at position 13 (allowed 1-7 or SUN-SAT "
       "(1 = SUN), nL, n#k, L or ?)"},
      {"0 0 0 ? * 8L", "cron: day-of-week out of range: 8 at position 11 (allowed 1-7)"},
      // years
      {"0 0 0 1 1 ? 2030-2020",
       "cron: year range runs backwards: 2030-2020 at position 17 (allowed ascending years within "
       "1970-2199)"},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.text);
    CronExpr e;
    std::string error;
    EXPECT_FALSE(ParseCron(row.text, &e, &error));
    EXPECT_EQ(error, row.message);
  }
}

TEST(CronExprTest, ShapeErrorsPointAtTheRightPlace) {
  const std::string kCount =
      " (allowed 5 fields (vixie), 6 or 7 fields (quartz), or a nickname: @yearly @annually "
      "@monthly @weekly @daily @midnight @hourly)";
  const std::pair<const char*, std::string> rows[] = {
      {"", "cron: empty expression at position 1" + kCount},
      {"   ", "cron: empty expression at position 4" + kCount},
      {"* * * *", "cron: wrong number of fields: 4 at position 1" + kCount},
      {"* * * * * * * *", "cron: wrong number of fields: 8 at position 15" + kCount},
      {"TZ=UTC ", "cron: missing fields after TZ=UTC at position 8" + kCount},
      {"TZ=UTC", "cron: missing fields after TZ=UTC at position 7" + kCount},
  };
  for (const auto& [text, message] : rows) {
    CronExpr e;
    std::string error;
    EXPECT_FALSE(ParseCron(text, &e, &error)) << text;
    EXPECT_EQ(error, message) << text;
  }
}

}  // namespace
}  // namespace lua_tasks
