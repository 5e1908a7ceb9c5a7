// SPDX-License-Identifier: MIT
// Cron expressions: parsing Quartz (6/7 fields) and Vixie (5 fields) text into match sets.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace date {
class time_zone;
}

namespace lua_tasks {

enum class CronDialect : uint8_t {
  kQuartz,  // 6 or 7 fields: seconds first, day-of-week 1-7 with 1 = SUN, optional year
  kVixie,   // 5 fields (and the @nicknames): day-of-week 0-7 with 0 and 7 = SUN, seconds = 0
};

inline constexpr int kCronMinYear = 1970;  // the Quartz year field's range
inline constexpr int kCronMaxYear = 2199;

// A parsed expression. A plain copyable value: every field set is a bit mask,
// so matching a candidate is a shift and a test, and the next allowed value is
// a count-trailing-zeros (see cron_schedule.cpp).
//
// Days of the week are stored as 0 = SUN .. 6 = SAT whatever the dialect; the
// dialect's own numbering exists only in the text.
struct CronExpr {
  CronDialect dialect = CronDialect::kQuartz;

  uint64_t seconds = 0;  // bit s: second s (0-59) allowed
  uint64_t minutes = 0;  // bit m: minute m (0-59)
  uint32_t hours = 0;    // bit h: hour h (0-23)
  uint32_t days = 0;     // bit d: day-of-month d (1-31), plain values only
  uint16_t months = 0;   // bit m: month m (1-12)
  uint8_t weekdays = 0;  // bit w: day-of-week w (0 = SUN), plain values only

  // Years 1970-2199, bit (y - 1970). Used only when !any_year; any_year lets
  // the search run past 2199 (up to 400 years after `from`).
  std::array<uint64_t, 4> years{};
  bool any_year = true;

  // Quartz day-of-month specials, each a set kept as bits.
  uint32_t last_minus = 0;          // bit n: L-n, the n-th day before the last (L is n = 0)
  uint32_t nearest_weekday = 0;     // bit d: dW, the weekday nearest day d in the same month
  uint32_t last_minus_weekday = 0;  // bit n: L-nW, the weekday nearest L-n (LW is n = 0)
  // Quartz day-of-week specials.
  uint8_t last_weekday = 0;      // bit w: wL, the last day w of the month
  std::array<uint8_t, 7> nth{};  // nth[w] bit k: w#k, the k-th (1-5) day w of the month

  // Derived from `weekdays` at parse time: dow_masks[f] has bit d set when day
  // d of a month whose 1st is weekday f is an allowed weekday. Saves a loop
  // per month in the search.
  std::array<uint32_t, 7> dow_masks{};

  bool dom_all = true;  // day-of-month is '*' or '?': every day matches it
  bool dow_all = true;  // day-of-week is '*' or '?'
  // Vixie: both day fields restricted (neither begins with '*'), so a day
  // matches if either does. Otherwise a day must match both.
  bool day_or = false;
  // DST policy (docs/design.md#cron): true when the seconds, minutes or hours field has
  // a '*', a range or a step ("interval job": skips missing local times, fires
  // in both passes of a repeated hour); false for fixed-time jobs (fires once
  // at the first valid instant after a gap, once at the first occurrence in an
  // overlap).
  bool interval = false;

  // From a `CRON_TZ=Zone ` / `TZ=Zone ` prefix; nullptr if none. Points into
  // date's process-wide tzdb, which is never freed, so copying is safe.
  const date::time_zone* zone = nullptr;
  std::string zone_name;
};

// Parses `text`. Returns true and fills *out, or false and sets *error to a
// lowercase message starting "cron: " that names the field, the 1-based
// character position, the value given and what is allowed, e.g.
// "cron: hour out of range: 24 at position 7 (allowed 0-23)".
// 6 or 7 fields are Quartz, 5 are Vixie, never guessed otherwise.
bool ParseCron(std::string_view text, CronExpr* out, std::string* error);

// The expanded fields, for JS `cron.describe(expr)`.
struct CronDescription {
  const char* dialect = "quartz";  // "quartz" or "vixie"
  std::string zone;                // the CRON_TZ zone, empty if none
  std::vector<int> seconds, minutes, hours;
  std::vector<int> days_of_month;  // plain values 1-31
  std::vector<int> months;         // 1-12
  std::vector<int> days_of_week;   // plain values, 0 = SUN .. 6 = SAT in both dialects
  std::vector<int> years;          // empty when any year matches
  bool every_day_of_month = true;  // '*' or '?'
  bool every_day_of_week = true;
  std::vector<int> last_day_offsets;                  // L = 0, L-3 = 3
  std::vector<int> nearest_weekdays;                  // 15W = 15
  std::vector<int> last_weekday_offsets;              // LW = 0, L-2W = 2
  std::vector<int> last_days_of_week;                 // 5L (Quartz: last THU) = 4, 0 = SUN
  std::vector<std::pair<int, int>> nth_days_of_week;  // 6#3 (Quartz: 3rd FRI) = {5, 3}
  bool day_or = false;                                // a day matches if either day field does (Vixie)
  bool interval = false;                              // DST class: interval (true) or fixed-time (false)
};
CronDescription DescribeCron(const CronExpr& expr);

}  // namespace lua_tasks
