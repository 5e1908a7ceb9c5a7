// SPDX-License-Identifier: MIT
// Cron schedule: the next instant a cron expression matches, in an IANA time zone.
//
// HOW
// The search runs on local civil time, written as "local seconds" (seconds
// since 1970-01-01T00:00:00 on the zone's wall clock). NextLocal() finds the
// first matching civil time at or after a start by jumping field by field:
// year, then month, then day, hour, minute, second, each jump a
// count-trailing-zeros on the field's bit mask; when a field has nothing left
// the next larger unit advances and the smaller ones restart at their minimum.
// A month's allowed days (day-of-month and day-of-week combined, with L, W
// and #) are built once per month as a 32-bit mask, so an expression with no
// match at all (30 FEB) costs one step per year until the horizon.
//
// A zone is a sequence of spans [begin, end) of instants with one UTC offset
// each (date's sys_info). Inside a span, instant = local - offset, so the
// search takes the span holding `from`, looks for the first civil match in the
// span's local window, and if the match lies past the window moves to the next
// span. The zone is asked once per span, never per candidate; a match found
// beyond one window is reused for the next when the window starts no later
// than the match (so `0 0 0 29 2 ?` costs one lookup per transition, not a
// re-search).
//
// WHY this shape (DESIGN §9)
// Local times are classified, not computed with lenient arithmetic: a civil
// time inside a forward gap belongs to no span window, and a civil time in a
// fall-back overlap belongs to two. Both DST rules then fall out of the window
// each kind of job searches:
//  - interval jobs (a '*', range or step in seconds/minutes/hours) search
//    exactly [max(from, begin), end) + offset: gap times are skipped and the
//    repeated hour is searched in both passes, in instant order;
//  - fixed-time jobs start each new span's window at begin + previous
//    offset: after a gap that takes in the skipped civil times, and one found
//    there fires at `begin`, the first valid instant after the gap; after an
//    overlap it starts past the repeated hour, so only the first occurrence
//    fires.
// "Strictly after from" is the search starting at from + 1, which also means
// a caller that feeds each result back never sees the same second twice.
//
// Limits: date reads the system's TZif files and does not apply their POSIX
// footer, so with Debian's tzdata there are no DST transitions after 2037; a
// zone is then at its standard offset.
#include "cron_schedule.hpp"

#include <date/tz.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <climits>
#include <exception>
#include <functional>
#include <map>
#include <mutex>

namespace lua_tasks {
namespace {

constexpr int64_t kDay = 86400;
// The calendar code covers years 1 to 9999; `from` is clamped into it.
constexpr int64_t kMinFrom = -62135596800 - 1;  // 0000-12-31T23:59:59Z
constexpr int64_t kMaxFrom = 253402300799;      // 9999-12-31T23:59:59Z
constexpr int kMaxSearchYear = 9999;
// The Gregorian calendar repeats every 400 years (146097 days, a whole number
// of weeks), so an expression with no match in 400 years never matches.
constexpr int kHorizonYears = 400;

int64_t FloorDiv(int64_t a, int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

int64_t DaysFromCivil(int y, unsigned m, unsigned d) {
  return date::sys_days(date::year{y} / date::month{m} / date::day{d}).time_since_epoch().count();
}

bool IsLeap(int y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int DaysInMonth(int y, int m) {
  static constexpr int8_t kDays[] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && IsLeap(y) ? 29 : kDays[m];
}

// 0 = SUN; 1970-01-01 was a Thursday.
int WeekdayOf(int64_t days) {
  return static_cast<int>(((days + 4) % 7 + 7) % 7);
}

// The weekday nearest day d (Quartz W), never leaving the month: a Saturday
// 1st moves forward to Monday the 3rd, a Sunday last day back to Friday.
int NearestWeekday(int d, int last, int first_wd) {
  const int wd = (first_wd + d - 1) % 7;
  if (wd == 6) return d == 1 ? 3 : d - 1;
  if (wd == 0) return d == last ? d - 2 : d + 1;
  return d;
}

// Bit d set for each day d of month m of year y that the day fields allow.
uint32_t DayMask(const CronExpr& e, int y, int m) {
  const int last = DaysInMonth(y, m);
  const uint32_t valid = (uint32_t{0xFFFFFFFF} >> (31 - last)) & ~uint32_t{1};  // days 1..last
  const int first_wd = WeekdayOf(DaysFromCivil(y, m, 1));

  uint32_t dom = valid;
  if (!e.dom_all) {
    dom = e.days & valid;
    for (uint32_t bits = e.last_minus; bits; bits &= bits - 1) {
      const int d = last - std::countr_zero(bits);
      if (d >= 1) dom |= uint32_t{1} << d;
    }
    for (uint32_t bits = e.nearest_weekday; bits; bits &= bits - 1) {
      const int d = std::countr_zero(bits);
      if (d <= last) dom |= uint32_t{1} << NearestWeekday(d, last, first_wd);
    }
    for (uint32_t bits = e.last_minus_weekday; bits; bits &= bits - 1) {
      const int d = last - std::countr_zero(bits);
      if (d >= 1) dom |= uint32_t{1} << NearestWeekday(d, last, first_wd);
    }
  }
  uint32_t dow = valid;
  if (!e.dow_all) {
    dow = e.dow_masks[first_wd] & valid;
    const int last_wd = (first_wd + last - 1) % 7;
    for (unsigned bits = e.last_weekday; bits; bits &= bits - 1) {
      const int w = std::countr_zero(bits);
      dow |= uint32_t{1} << (last - (last_wd - w + 7) % 7);
    }
    for (int w = 0; w < 7; ++w) {
      if (!e.nth[w]) continue;
      const int first = 1 + (w - first_wd + 7) % 7;
      for (unsigned bits = e.nth[w]; bits; bits &= bits - 1) {
        const int d = first + 7 * (std::countr_zero(bits) - 1);
        if (d <= last) dow |= uint32_t{1} << d;  // no 5th FRI this month: no match
      }
    }
  }
  return e.day_or ? (dom | dow) : (dom & dow);
}

bool YearAllowed(const CronExpr& e, int y) {
  if (e.any_year) return true;
  if (y < kCronMinYear || y > kCronMaxYear) return false;
  const int i = y - kCronMinYear;
  return (e.years[i >> 6] >> (i & 63)) & 1;
}

// The first allowed year >= y, or INT_MAX if none.
int NextYear(const CronExpr& e, int y) {
  for (int i = std::max(y, kCronMinYear) - kCronMinYear; i <= kCronMaxYear - kCronMinYear;) {
    const uint64_t word = e.years[i >> 6] >> (i & 63);
    if (word) return kCronMinYear + i + std::countr_zero(word);
    i = (i | 63) + 1;
  }
  return INT_MAX;
}

// The first civil time >= start (local seconds) that matches, or nullopt if
// none does up to the end of max_year.
std::optional<int64_t> NextLocal(const CronExpr& e, int64_t start, int max_year) {
  const int64_t start_days = FloorDiv(start, kDay);
  const int64_t sod = start - start_days * kDay;
  const date::year_month_day ymd{date::sys_days{date::days{static_cast<int>(start_days)}}};
  int y = static_cast<int>(ymd.year());
  int mo = static_cast<int>(static_cast<unsigned>(ymd.month()));
  int d = static_cast<int>(static_cast<unsigned>(ymd.day()));
  int h = static_cast<int>(sod / 3600), mi = static_cast<int>(sod / 60 % 60),
      s = static_cast<int>(sod % 60);
  int mask_y = INT_MIN, mask_mo = 0;
  uint32_t mask = 0;
  for (;;) {
    if (mo > 12) {
      ++y;
      mo = 1;
    }
    if (y > max_year) return std::nullopt;
    if (!YearAllowed(e, y)) {
      y = NextYear(e, y);
      if (y > max_year) return std::nullopt;
      mo = 1, d = 1, h = 0, mi = 0, s = 0;
    }
    if (!((e.months >> mo) & 1)) {
      const unsigned later = e.months & (~0u << mo);
      if (!later) {
        ++y;
        mo = 1, d = 1, h = 0, mi = 0, s = 0;
        continue;
      }
      mo = std::countr_zero(later);
      d = 1, h = 0, mi = 0, s = 0;
    }
    if (y != mask_y || mo != mask_mo) {
      mask = DayMask(e, y, mo);
      mask_y = y;
      mask_mo = mo;
    }
    const uint32_t days = d <= 31 ? mask & (~uint32_t{0} << d) : 0;
    if (!days) {
      ++mo;
      d = 1, h = 0, mi = 0, s = 0;
      continue;
    }
    if (const int nd = std::countr_zero(days); nd != d) {
      d = nd;
      h = 0, mi = 0, s = 0;
    }
    const uint32_t hours = h < 24 ? e.hours & (~uint32_t{0} << h) : 0;
    if (!hours) {
      ++d;
      h = 0, mi = 0, s = 0;
      continue;
    }
    if (const int nh = std::countr_zero(hours); nh != h) {
      h = nh;
      mi = 0, s = 0;
    }
    const uint64_t minutes = mi < 60 ? e.minutes & (~uint64_t{0} << mi) : 0;
    if (!minutes) {
      ++h;
      mi = 0, s = 0;
      continue;
    }
    if (const int nm = std::countr_zero(minutes); nm != mi) {
      mi = nm;
      s = 0;
    }
    const uint64_t seconds = s < 60 ? e.seconds & (~uint64_t{0} << s) : 0;
    if (!seconds) {
      ++mi;
      s = 0;
      continue;
    }
    s = std::countr_zero(seconds);
    return DaysFromCivil(y, mo, d) * kDay + h * 3600 + mi * 60 + s;
  }
}

// One stretch of instants [begin, end) with a single UTC offset.
struct Span {
  int64_t begin, end;
  int64_t offset;  // local = instant + offset, in seconds
};

Span SpanAt(const date::time_zone* zone, int64_t t) {
  const date::sys_info info = zone->get_info(date::sys_seconds{std::chrono::seconds{t}});
  return {info.begin.time_since_epoch().count(), info.end.time_since_epoch().count(),
          info.offset.count()};
}

}  // namespace

const date::time_zone* FindZone(std::string_view name, std::string* error) {
  // date's tzdb is process-wide and never freed; this map only saves the
  // name lookup. Leaked on purpose so no thread can see it destroyed at exit.
  static std::mutex mu;
  static auto* cache = new std::map<std::string, const date::time_zone*, std::less<>>();
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache->find(name); it != cache->end()) return it->second;
  }
  const date::time_zone* zone = nullptr;
  try {
    zone = date::locate_zone(name);
    // Force the lazy load of the zone's file now, so a broken file is an
    // error here rather than an exception in CronNext.
    zone->get_info(date::sys_seconds{});
  } catch (const std::exception& e) {
    if (error) {
      std::string shown;
      for (unsigned char c : name.substr(0, 64)) shown += (c >= 0x20 && c < 0x7f) ? char(c) : '?';
      *error = "cron: unknown time zone: '" + shown +
               "' (allowed an IANA zone name such as Europe/Paris)";
    }
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(mu);
  cache->emplace(std::string(name), zone);
  return zone;
}

std::optional<int64_t> CronNext(const CronExpr& expr, int64_t from, const date::time_zone* zone) {
  if (expr.zone) zone = expr.zone;
  if (from >= kMaxFrom) return std::nullopt;
  from = std::max(from, kMinFrom);
  const int64_t t = from + 1;  // strictly after; `from` is whole seconds already
  // A day of slack on either side: the local year may differ from UTC's.
  const int from_year = static_cast<int>(
      date::year_month_day{date::sys_days{date::days{static_cast<int>(FloorDiv(t, kDay))}}}.year());
  const int max_year =
      expr.any_year ? std::min(kMaxSearchYear, from_year + 1 + kHorizonYears) : kCronMaxYear;
  if (!zone) return NextLocal(expr, t, max_year);

  Span span = SpanAt(zone, t);
  // Fixed-time jobs need the offset before the span, to know whether its
  // start left a gap or repeats an hour.
  int64_t prev =
      expr.interval || span.begin <= kMinFrom ? span.offset : SpanAt(zone, span.begin - 1).offset;
  std::optional<int64_t> found;
  int64_t searched_from = INT64_MAX;
  for (;;) {
    int64_t start;
    if (expr.interval)
      start = std::max(t, span.begin) + span.offset;
    else
      start = t <= span.begin ? span.begin + prev : std::max(t + span.offset, span.begin + prev);
    // `found` is the first match at or after `searched_from`, so it is still
    // the first match at or after any start between the two.
    if (start < searched_from || !found || start > *found) found = NextLocal(expr, start, max_year);
    searched_from = start;
    if (!found) return std::nullopt;
    if (*found < span.end + span.offset) {
      const int64_t instant = *found - span.offset;
      // A fixed-time match inside the gap fires at the first valid instant.
      return expr.interval ? instant : std::max(instant, span.begin);
    }
    prev = span.offset;
    span = SpanAt(zone, span.end);
  }
}

LocalTimeKind ClassifyLocalTime(const date::time_zone* zone, int64_t local_seconds) {
  if (!zone) return LocalTimeKind::kNormal;
  const date::local_info info =
      zone->get_info(date::local_seconds{std::chrono::seconds{local_seconds}});
  switch (info.result) {
    case date::local_info::nonexistent:
      return LocalTimeKind::kNonexistent;
    case date::local_info::ambiguous:
      return LocalTimeKind::kAmbiguous;
    default:
      return LocalTimeKind::kNormal;
  }
}

}  // namespace lua_tasks
