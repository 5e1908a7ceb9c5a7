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
// WHY this shape (docs/design.md#cron)
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
// date reads the system's TZif files but not their POSIX-rule footer, so past
// the last explicit transition (2037 in Debian's tzdata) the footer is read
// here and applied (SpanAt), keeping DST in 2038 and after.
#include "core/cron/cron_schedule.hpp"

#include <date/tz.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
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
  int h = static_cast<int>(sod / 3600), mi = static_cast<int>(sod / 60 % 60), s = static_cast<int>(sod % 60);
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

// ---- after the last transition: the TZif footer's POSIX rule -------------------
//
// date reads the system's TZif files but not their footer (a POSIX TZ string
// such as "EST5EDT,M3.2.0,M11.1.0"), so past the file's last explicit
// transition (2037 in Debian's tzdata) it would hold one offset forever and
// drop DST. The rule is read here and used for those instants only.

struct RuleDate {
  char kind = 'M';                   // 'M' month.week.day, 'J' Julian day 1-365 (no Feb 29), 'N' day 0-365
  int month = 0, week = 0, day = 0;  // M: week 5 = last; day 0 = SUN. J/N: day
  int64_t time = 7200;               // local seconds after midnight; may be <0 or >24h
};

struct PosixRule {
  int64_t std_offset = 0, dst_offset = 0;  // seconds east of UTC
  bool has_dst = false;
  RuleDate start, end;  // DST starts (in standard time), ends (in DST)
};

class RuleParser {
 public:
  explicit RuleParser(std::string_view s) : s_(s) {}

  bool Parse(PosixRule* r) {
    if (!Name() || !Offset(&r->std_offset)) return false;
    r->std_offset = -r->std_offset;  // POSIX counts west of UTC
    if (i_ == s_.size()) return true;
    if (!Name()) return false;
    r->has_dst = true;
    r->dst_offset = r->std_offset + 3600;
    if (i_ < s_.size() && s_[i_] != ',') {
      if (!Offset(&r->dst_offset)) return false;
      r->dst_offset = -r->dst_offset;
    }
    if (i_ == s_.size()) {  // no rule given: POSIX leaves it to the implementation; US rules
      r->start = {'M', 3, 2, 0, 7200};
      r->end = {'M', 11, 1, 0, 7200};
      return true;
    }
    return Eat(',') && Date(&r->start) && Eat(',') && Date(&r->end) && i_ == s_.size();
  }

 private:
  bool Eat(char c) {
    if (i_ >= s_.size() || s_[i_] != c) return false;
    ++i_;
    return true;
  }
  bool Name() {
    if (Eat('<')) {
      while (i_ < s_.size() && s_[i_] != '>') ++i_;
      return Eat('>');
    }
    const size_t start = i_;
    while (i_ < s_.size() && ((s_[i_] >= 'A' && s_[i_] <= 'Z') || (s_[i_] >= 'a' && s_[i_] <= 'z'))) ++i_;
    return i_ - start >= 3;
  }
  bool Int(int* v, int max) {
    if (i_ >= s_.size() || s_[i_] < '0' || s_[i_] > '9') return false;
    *v = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      *v = *v * 10 + (s_[i_++] - '0');
      if (*v > max) return false;
    }
    return true;
  }
  // [+-]h[:mm[:ss]], hours up to 167 (RFC 8536 extends POSIX's 24).
  bool Offset(int64_t* out) {
    int sign = 1;
    if (Eat('-'))
      sign = -1;
    else
      Eat('+');
    int h = 0, m = 0, sec = 0;
    if (!Int(&h, 167)) return false;
    if (Eat(':') && (!Int(&m, 59) || (Eat(':') && !Int(&sec, 59)))) return false;
    *out = sign * (int64_t{h} * 3600 + m * 60 + sec);
    return true;
  }
  bool Date(RuleDate* d) {
    if (Eat('M')) {
      d->kind = 'M';
      if (!Int(&d->month, 12) || !Eat('.') || !Int(&d->week, 5) || !Eat('.') || !Int(&d->day, 6)) return false;
      if (d->month < 1 || d->week < 1) return false;
    } else if (Eat('J')) {
      d->kind = 'J';
      if (!Int(&d->day, 365) || d->day < 1) return false;
    } else {
      d->kind = 'N';
      if (!Int(&d->day, 365)) return false;
    }
    d->time = 7200;
    return !Eat('/') || Offset(&d->time);
  }

  std::string_view s_;
  size_t i_ = 0;
};

// The footer of the zone's TZif file (its last line), parsed; nullopt when
// the file cannot be read or the rule has no DST (date's answer stands).
std::optional<PosixRule> LoadRule(const date::time_zone* zone) {
  std::FILE* f = std::fopen(("/usr/share/zoneinfo/" + std::string(zone->name())).c_str(), "rb");
  if (!f) return std::nullopt;
  std::string data;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0 && data.size() < (1 << 20);) data.append(buf, n);
  std::fclose(f);
  if (data.size() < 2 || data.back() != '\n') return std::nullopt;
  const size_t nl = data.rfind('\n', data.size() - 2);
  if (nl == std::string::npos) return std::nullopt;
  PosixRule rule;
  if (!RuleParser(std::string_view(data).substr(nl + 1, data.size() - nl - 2)).Parse(&rule) || !rule.has_dst)
    return std::nullopt;
  return rule;
}

// What a zone needs beyond date: its rule, and where date's open-ended last
// span begins (from there on the rule decides).
struct ZoneTail {
  std::optional<PosixRule> rule;
  int64_t begin = INT64_MAX;
};

// Cached per zone for the life of the process, like date's tzdb itself (a
// map's nodes never move, so references stay valid). A one-entry
// thread_local cache in front keeps the mutex off the common path; each
// thread (Workers included) has its own.
const ZoneTail& TailFor(const date::time_zone* zone) {
  thread_local const date::time_zone* last_zone = nullptr;
  thread_local const ZoneTail* last_tail = nullptr;
  if (zone == last_zone) return *last_tail;
  static std::mutex mu;
  static auto* cache = new std::map<const date::time_zone*, ZoneTail>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache->find(zone);
  if (it == cache->end()) {
    ZoneTail tail;
    const date::sys_info info = zone->get_info(date::sys_seconds{std::chrono::seconds{kMaxFrom}});
    if (info.end.time_since_epoch().count() > kMaxFrom) {
      tail.rule = LoadRule(zone);
      tail.begin = info.begin.time_since_epoch().count();
    }
    it = cache->emplace(zone, std::move(tail)).first;
  }
  last_zone = zone;
  last_tail = &it->second;
  return it->second;
}

// Local seconds of a rule date in year y, at its time of day.
int64_t RuleLocal(const RuleDate& d, int y) {
  const int64_t jan1 = DaysFromCivil(y, 1, 1);
  int64_t day;
  if (d.kind == 'J') {
    day = jan1 + d.day - 1 + (IsLeap(y) && d.day >= 60 ? 1 : 0);
  } else if (d.kind == 'N') {
    day = jan1 + d.day;
  } else {
    const int64_t first = DaysFromCivil(y, d.month, 1);
    int dom = 1 + (d.day - WeekdayOf(first) + 7) % 7 + 7 * (d.week - 1);
    while (dom > DaysInMonth(y, d.month)) dom -= 7;  // week 5 = the last one
    day = first + dom - 1;
  }
  return day * kDay + d.time;
}

// The span holding t under the rule alone.
Span RuleSpan(const PosixRule& r, int64_t t, int y) {
  struct Change {
    int64_t at, offset;
  };
  constexpr int n = 6;
  // The changes of years y-1..y+1, in order. A walk over a zone's spans asks
  // for the same year about twice in a row, so the last year's are kept
  // (rules live as long as the process, in TailFor's cache).
  thread_local const PosixRule* memo_rule = nullptr;
  thread_local int memo_year = 0;
  thread_local Change changes[n];
  if (memo_rule != &r || memo_year != y) {
    int k = 0;
    for (int year = y - 1; year <= y + 1; ++year) {
      // Ends first at equal instants, so an all-year DST rule stays in DST.
      changes[k++] = {RuleLocal(r.end, year) - r.dst_offset, r.std_offset};
      changes[k++] = {RuleLocal(r.start, year) - r.std_offset, r.dst_offset};
    }
    // Insertion sort: stable, and six entries need no buffer (std::stable_sort
    // allocated one per call).
    for (int i = 1; i < n; ++i) {
      const Change c = changes[i];
      int j = i;
      for (; j > 0 && changes[j - 1].at > c.at; --j) changes[j] = changes[j - 1];
      changes[j] = c;
    }
    memo_rule = &r;
    memo_year = y;
  }
  Span span{INT64_MIN, INT64_MAX, r.std_offset};
  for (int i = 0; i < n; ++i) {
    if (changes[i].at <= t) {
      span.begin = changes[i].at;
      span.offset = changes[i].offset;
    } else {
      span.end = changes[i].at;
      break;
    }
  }
  return span;
}

Span SpanAt(const date::time_zone* zone, const ZoneTail& tail, int64_t t) {
  // Past the last explicit transition date's span runs to the end of time;
  // the rule splits it at each DST change.
  if (tail.rule && t >= tail.begin && t < kMaxFrom) {
    const int y =
        static_cast<int>(date::year_month_day{date::sys_days{date::days{static_cast<int>(FloorDiv(t, kDay))}}}.year());
    Span span = RuleSpan(*tail.rule, t, y);
    span.begin = std::max(span.begin, tail.begin);
    return span;
  }
  const date::sys_info info = zone->get_info(date::sys_seconds{std::chrono::seconds{t}});
  return {info.begin.time_since_epoch().count(), info.end.time_since_epoch().count(), info.offset.count()};
}

Span SpanAt(const date::time_zone* zone, int64_t t) {
  return SpanAt(zone, TailFor(zone), t);
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
      *error = "cron: unknown time zone: '" + shown + "' (allowed an IANA zone name such as Europe/Paris)";
    }
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(mu);
  cache->emplace(std::string(name), zone);
  return zone;
}

const date::time_zone* ProcessZone() {
  if (const char* tz = std::getenv("TZ"); tz != nullptr && *tz != '\0') {
    std::string_view name(tz);
    if (name.front() == ':') name.remove_prefix(1);
    if (const date::time_zone* z = FindZone(name, nullptr)) return z;
  }
  try {
    return date::current_zone();
  } catch (...) {
    return nullptr;
  }
}

std::optional<int64_t> CronNext(const CronExpr& expr, int64_t from, const date::time_zone* zone) {
  if (expr.zone) zone = expr.zone;
  if (from >= kMaxFrom) return std::nullopt;
  from = std::max(from, kMinFrom);
  const int64_t t = from + 1;  // strictly after; `from` is whole seconds already
  // A day of slack on either side: the local year may differ from UTC's.
  const int from_year =
      static_cast<int>(date::year_month_day{date::sys_days{date::days{static_cast<int>(FloorDiv(t, kDay))}}}.year());
  const int max_year = expr.any_year ? std::min(kMaxSearchYear, from_year + 1 + kHorizonYears) : kCronMaxYear;
  if (!zone) return NextLocal(expr, t, max_year);

  const ZoneTail& tail = TailFor(zone);
  Span span = SpanAt(zone, tail, t);
  // Fixed-time jobs need the offset before the span, to know whether its
  // start left a gap or repeats an hour.
  int64_t prev = expr.interval || span.begin <= kMinFrom ? span.offset : SpanAt(zone, tail, span.begin - 1).offset;
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
      const int64_t next = expr.interval ? instant : std::max(instant, span.begin);
      // West of UTC, local 9999-12-31 reaches into UTC year 10000, where no
      // search may start: such an instant would have no instant before it.
      if (next > kMaxFrom) return std::nullopt;
      return next;
    }
    prev = span.offset;
    span = SpanAt(zone, tail, span.end);
  }
}

int64_t ZoneOffset(const date::time_zone* zone, int64_t epoch_seconds) {
  if (!zone) return 0;
  return SpanAt(zone, std::clamp(epoch_seconds, kMinFrom, kMaxFrom - 1)).offset;
}

LocalTimeKind ClassifyLocalTime(const date::time_zone* zone, int64_t local_seconds) {
  if (!zone) return LocalTimeKind::kNormal;
  local_seconds = std::clamp(local_seconds, kMinFrom + kDay, kMaxFrom - kDay);
  // Transitions are months apart, so the span near this wall time and its two
  // neighbours hold every instant that could show it; count those that do.
  const Span near = SpanAt(zone, local_seconds - SpanAt(zone, local_seconds).offset);
  const Span spans[] = {near.begin > kMinFrom ? SpanAt(zone, near.begin - 1) : near, near,
                        near.end < kMaxFrom ? SpanAt(zone, near.end) : near};
  int hits = 0;
  for (int i = 0; i < 3; ++i) {
    if (i != 1 && spans[i].begin == near.begin) continue;  // no neighbour on that side
    const int64_t instant = local_seconds - spans[i].offset;
    if (instant >= spans[i].begin && instant < spans[i].end) ++hits;
  }
  return hits == 0 ? LocalTimeKind::kNonexistent : hits == 1 ? LocalTimeKind::kNormal : LocalTimeKind::kAmbiguous;
}

}  // namespace lua_tasks
