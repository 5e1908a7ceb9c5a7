// SPDX-License-Identifier: MIT
// Cron expressions: parsing Quartz (6/7 fields) and Vixie (5 fields) text into match sets.
//
// The dialect comes from the field count alone (docs/design.md#cron): 6 or 7 fields are
// Quartz, 5 are Vixie, and the nicknames are Vixie lines. Each field is a
// comma list of items; an item is a value, a range (which may wrap, as in
// 22-2 or NOV-FEB), either with an optional /step, or one of the Quartz day
// specials. Every item is checked against the field's range with the position
// of the offending character, so a user can find the mistake in a long line.
#include "core/cron/cron_expr.hpp"
#include "core/base/ascii.hpp"

#include <bit>
#include <cstdio>

#include "core/cron/cron_schedule.hpp"

namespace lua_tasks {
namespace {

enum Field : uint8_t { kSecond, kMinute, kHour, kDom, kMonth, kDow, kYear };

// Longest accepted text: no real expression comes near it, and it keeps
// error messages (which quote input) short.
constexpr size_t kMaxText = 1024;

constexpr const char* kFieldNames[] = {"second", "minute", "hour", "day-of-month", "month", "day-of-week", "year"};
constexpr const char* kMonthNames[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                       "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
constexpr const char* kDayNames[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};
constexpr const char* kFieldCountHelp =
    "allowed 5 fields (vixie), 6 or 7 fields (quartz), or a nickname: @yearly @annually "
    "@monthly @weekly @daily @midnight @hourly";

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}
constexpr auto IsAlpha = AsciiIsAlpha;
constexpr auto Upper = AsciiUpper;
constexpr auto EqualsNoCase = EqualsIgnoringAsciiCase;

// Input quoted in a message: control and non-ASCII bytes are escaped so the
// message stays valid, printable UTF-8 whatever was passed in.
std::string Shown(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

// True if some item of a day-of-week field writes its day (the part before
// any /step or #k) with digits: Quartz reads those with 1 = SUN, node-cron
// and croner with 1 = MON. Day names mean the same everywhere.
bool NumericDays(std::string_view dow) {
  bool day = true;  // in the day part of an item
  for (char c : dow) {
    if (c == ',') {
      day = true;
    } else if (c == '/' || c == '#') {
      day = false;
    } else if (day && IsDigit(c)) {
      return true;
    }
  }
  return false;
}

// dow with each day number read as node-cron and croner read it (0 and 7 =
// SUN, 1 = MON) and written as a name: "1-5" -> "MON-FRI", "5L" -> "FRIL".
std::string DayNames(std::string_view dow) {
  static constexpr const char* kNames[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};
  std::string out;
  bool day = true;
  for (size_t i = 0; i < dow.size();) {
    const char c = dow[i];
    if (day && IsDigit(c)) {
      int v = 0;
      for (; i < dow.size() && IsDigit(dow[i]); ++i)
        if (v < 1000) v = v * 10 + (dow[i] - '0');
      out += kNames[v % 7];
      continue;
    }
    if (c == ',') day = true;
    if (c == '/' || c == '#') day = false;
    out += c;
    ++i;
  }
  return out;
}

// Numeric range of a field as written in the text of a dialect.
struct Range {
  int lo, hi;
};
Range TextRange(Field f, CronDialect d) {
  switch (f) {
    case kSecond:
    case kMinute:
      return {0, 59};
    case kHour:
      return {0, 23};
    case kDom:
      return {1, 31};
    case kMonth:
      return {1, 12};
    case kDow:
      return d == CronDialect::kQuartz ? Range{1, 7} : Range{0, 7};
    case kYear:
      return {kCronMinYear, kCronMaxYear};
  }
  return {0, 0};
}

std::string RangeText(Range r) {
  return std::to_string(r.lo) + "-" + std::to_string(r.hi);
}

// What a field accepts, for "invalid value" messages.
std::string AllowedText(Field f, CronDialect d) {
  const bool q = d == CronDialect::kQuartz;
  switch (f) {
    case kDom:
      return q ? "1-31, L, L-n, nW, LW, L-nW or ?" : "1-31; L, W and ? need 6 or 7 fields (quartz)";
    case kMonth:
      return "1-12 or JAN-DEC";
    case kDow:
      return q ? "1-7 or SUN-SAT (1 = SUN), nL, n#k, L or ?"
               : "0-7 or SUN-SAT (0 and 7 = SUN); L, # and ? need 6 or 7 fields (quartz)";
    default:
      return RangeText(TextRange(f, d));
  }
}

// One field's parse result, in the text's own numbering.
struct FieldSet {
  std::array<uint64_t, 4> bits{};  // bit (v - lo)
  bool question = false;           // the field is '?'
  uint32_t last_minus = 0, nearest_weekday = 0, last_minus_weekday = 0;
  uint8_t last_weekday = 0;      // bit w, 0 = SUN
  std::array<uint8_t, 7> nth{};  // nth[w] bit k

  void Set(int v, int lo) {
    const int i = v - lo;
    bits[i >> 6] |= uint64_t{1} << (i & 63);
  }
  bool Has(int v, int lo) const {
    const int i = v - lo;
    return (bits[i >> 6] >> (i & 63)) & 1;
  }
};

class Parser {
 public:
  Parser(std::string_view text, std::string* error) : text_(text), error_(error) {}

  bool Parse(CronExpr* out);

 private:
  // Error helpers: all return false so callers can `return Fail...`.
  bool Fail(std::string msg, size_t pos, const std::string& allowed) {
    if (error_) *error_ = "cron: " + msg + " at position " + std::to_string(pos + 1) + " (" + allowed + ")";
    return false;
  }
  // The token starting at pos, up to the next separator, for messages.
  std::string TokenAt(size_t pos) const {
    size_t end = pos;
    while (end < text_.size() && !IsSpace(text_[end]) && text_[end] != ',' &&
           (end == pos || (text_[end] != '-' && text_[end] != '/' && text_[end] != '#')))
      ++end;
    if (end == pos && pos < text_.size()) ++end;
    return Shown(text_.substr(pos, end - pos));
  }
  bool FailInvalid(size_t pos) {
    if (pos >= field_end_ || text_[pos] == ',')
      return Fail(std::string(kFieldNames[field_]) + " is missing a value", pos,
                  "allowed " + AllowedText(field_, dialect_));
    return Fail(std::string(kFieldNames[field_]) + " has an invalid value: '" + TokenAt(pos) + "'", pos,
                "allowed " + AllowedText(field_, dialect_));
  }
  bool FailRange(std::string_view what, size_t pos, size_t end, Range r) {
    std::string name = kFieldNames[field_];
    if (!what.empty()) name += " " + std::string(what);
    return Fail(name + " out of range: " + Shown(text_.substr(pos, end - pos)), pos, "allowed " + RangeText(r));
  }

  bool FailAmbiguousDays(const std::string_view* texts, size_t pos);
  bool ParseNickname(std::string_view word, size_t pos, CronExpr* out);
  bool ParseFields(CronExpr* out);
  bool ParseField(Field f, size_t begin, size_t end, FieldSet* set);
  bool ParseItem(size_t begin, size_t end, bool alone, FieldSet* set);
  // Reads a plain number at *i (no sign); false if there is none. Saturates
  // so huge inputs still report their text, not a wrapped value.
  bool Number(size_t* i, size_t end, int* v) const {
    if (*i >= end || !IsDigit(text_[*i])) return false;
    long acc = 0;
    while (*i < end && IsDigit(text_[*i])) {
      if (acc < 1000000) acc = acc * 10 + (text_[*i] - '0');
      ++*i;
    }
    *v = static_cast<int>(acc);
    return true;
  }
  // A value of the current field: a number in range or (month, day-of-week)
  // a three-letter name.
  bool Value(size_t* i, size_t end, int* v);
  bool Step(size_t* i, size_t end, int* step);

  std::string_view text_;
  std::string* error_;
  CronDialect dialect_ = CronDialect::kQuartz;
  Field field_ = kSecond;
  size_t field_end_ = 0;
  // Field boundaries in text_ (begin, end), in order.
  std::vector<std::pair<size_t, size_t>> fields_;
};

bool Parser::Value(size_t* i, size_t end, int* v) {
  const size_t start = *i;
  const Range r = TextRange(field_, dialect_);
  if (Number(i, end, v)) {
    if (*v < r.lo || *v > r.hi) return FailRange("", start, *i, r);
    return true;
  }
  if (*i + 3 <= end && IsAlpha(text_[*i]) && (field_ == kMonth || field_ == kDow)) {
    const std::string_view word = text_.substr(*i, 3);
    if (field_ == kMonth) {
      for (int m = 0; m < 12; ++m)
        if (EqualsNoCase(word, kMonthNames[m])) {
          *v = m + 1;
          *i += 3;
          return true;
        }
    } else {
      for (int w = 0; w < 7; ++w)
        if (EqualsNoCase(word, kDayNames[w])) {
          *v = dialect_ == CronDialect::kQuartz ? w + 1 : w;
          *i += 3;
          return true;
        }
    }
  }
  return FailInvalid(start);
}

bool Parser::Step(size_t* i, size_t end, int* step) {
  // Step caps follow Quartz: a step larger than the field's top value is a
  // mistake (*/60 on seconds, */13 on months), not a way to say "once".
  const Range r = TextRange(field_, dialect_);
  const int cap = field_ == kYear ? r.hi - r.lo : r.hi;
  const size_t start = *i;
  if (!Number(i, end, step)) {
    if (start >= end || text_[start] == ',')
      return Fail(std::string(kFieldNames[field_]) + " is missing a step after '/'", start,
                  "allowed 1-" + std::to_string(cap));
    return Fail(std::string(kFieldNames[field_]) + " has an invalid step: '" + TokenAt(start) + "'", start,
                "allowed 1-" + std::to_string(cap));
  }
  if (*step < 1 || *step > cap) return FailRange("step", start, *i, Range{1, cap});
  return true;
}

// Adds a, a+step, ... up to b; when a > b the range wraps through the field's
// top back to its bottom (22-2 is 22,23,0,1,2), and the step counts across
// the wrap, as the arithmetic says.
void AddRange(FieldSet* set, Range cycle, int lo, int a, int b, int step) {
  const int size = cycle.hi - cycle.lo + 1;
  const int count = a <= b ? b - a + 1 : (b - cycle.lo + 1) + (cycle.hi - a + 1);
  for (int k = 0; k < count; k += step) {
    int v = a + k;
    if (v > cycle.hi) v -= size;
    set->Set(v, lo);
  }
}

bool Parser::ParseItem(size_t begin, size_t end, bool alone, FieldSet* set) {
  const bool quartz = dialect_ == CronDialect::kQuartz;
  const Range r = TextRange(field_, dialect_);
  // Vixie writes SUN as 0 or 7; '*' and wrapping ranges cycle through 0-6.
  const Range cycle = (field_ == kDow && !quartz) ? Range{0, 6} : r;
  const std::string_view item = text_.substr(begin, end - begin);
  size_t i = begin;
  auto expect_end = [&](size_t at) {
    if (at == end) return true;
    return Fail(std::string(kFieldNames[field_]) + " has an unexpected character: '" + Shown(text_.substr(at, 1)) + "'",
                at, "allowed " + AllowedText(field_, dialect_));
  };

  if (item == "?") {
    if (!quartz || (field_ != kDom && field_ != kDow))
      return Fail(std::string("'?' is not allowed in the ") + kFieldNames[field_] + " field", begin,
                  "allowed only in day-of-month or day-of-week of 6/7-field (quartz) expressions");
    if (!alone)
      return Fail(std::string("'?' must stand alone in ") + kFieldNames[field_], begin,
                  "allowed '?' or a list without it");
    set->question = true;
    return true;
  }
  if (text_[i] == '*') {
    ++i;
    int step = 1;
    if (i < end) {
      if (text_[i] != '/') return expect_end(i);
      ++i;
      if (!Step(&i, end, &step)) return false;
      if (!expect_end(i)) return false;
    }
    AddRange(set, cycle, r.lo, cycle.lo, cycle.hi, step);
    return true;
  }
  if (quartz && field_ == kDom && Upper(text_[i]) == 'L') {
    // L, L-n, LW, L-nW: counted back from the month's last day.
    ++i;
    int n = 0;
    if (i < end && text_[i] == '-') {
      const size_t at = ++i;
      if (!Number(&i, end, &n)) return FailInvalid(at);
      if (n < 1 || n > 30) return FailRange("offset", at, i, Range{1, 30});
    }
    if (i < end && Upper(text_[i]) == 'W') {
      ++i;
      if (!expect_end(i)) return false;
      set->last_minus_weekday |= uint32_t{1} << n;
      return true;
    }
    if (!expect_end(i)) return false;
    set->last_minus |= uint32_t{1} << n;
    return true;
  }
  if (quartz && field_ == kDow && EqualsNoCase(item, "L")) {
    set->Set(7, r.lo);  // Quartz: a bare L in day-of-week is SAT
    return true;
  }

  int a = 0;
  if (!Value(&i, end, &a)) return false;
  if (quartz && field_ == kDom && i < end && Upper(text_[i]) == 'W') {
    if (!expect_end(i + 1)) return false;
    set->nearest_weekday |= uint32_t{1} << a;
    return true;
  }
  if (quartz && field_ == kDow && i < end && Upper(text_[i]) == 'L') {
    if (!expect_end(i + 1)) return false;
    set->last_weekday |= uint8_t(1u << (a - 1));
    return true;
  }
  if (quartz && field_ == kDow && i < end && text_[i] == '#') {
    const size_t at = ++i;
    int k = 0;
    if (!Number(&i, end, &k)) return FailInvalid(at);
    if (k < 1 || k > 5) return FailRange("occurrence", at, i, Range{1, 5});
    if (!expect_end(i)) return false;
    set->nth[a - 1] |= uint8_t(1u << k);
    return true;
  }

  int b = a, step = 1;
  bool ranged = false;
  const size_t range_at = i;
  if (i < end && text_[i] == '-') {
    ++i;
    if (!Value(&i, end, &b)) return false;
    ranged = true;
  }
  if (i < end && text_[i] == '/') {
    ++i;
    if (!Step(&i, end, &step)) return false;
    if (!ranged) b = cycle.hi;  // a/n: from a to the field's top
    ranged = true;
  }
  if (!expect_end(i)) return false;
  if (!ranged) {
    set->Set(a, r.lo);
    return true;
  }
  if (a > b) {
    if (field_ == kYear)
      return Fail("year range runs backwards: " + Shown(text_.substr(begin, i - begin)), range_at,
                  "allowed ascending years within " + RangeText(r));
    if (field_ == kDow && !quartz && a == 7) a = 0;  // 7-3 is SUN-WED, not a wrap
  }
  AddRange(set, cycle, r.lo, a, b, step);
  return true;
}

bool Parser::ParseField(Field f, size_t begin, size_t end, FieldSet* set) {
  field_ = f;
  field_end_ = end;
  const bool alone = text_.substr(begin, end - begin).find(',') == std::string_view::npos;
  size_t item = begin;
  for (size_t i = begin; i <= end; ++i) {
    if (i < end && text_[i] != ',') continue;
    if (i == item)
      return Fail(std::string(kFieldNames[f]) + " has an empty list item", i, "allowed " + AllowedText(f, dialect_));
    if (!ParseItem(item, i, alone, set)) return false;
    item = i + 1;
  }
  return true;
}

bool Parser::ParseNickname(std::string_view word, size_t pos, CronExpr* out) {
  static constexpr std::pair<const char*, const char*> kNicknames[] = {
      {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"}, {"@weekly", "0 0 * * 0"},
      {"@daily", "0 0 * * *"},  {"@midnight", "0 0 * * *"}, {"@hourly", "0 * * * *"},
  };
  for (const auto& [name, line] : kNicknames) {
    if (!EqualsNoCase(word, name)) continue;
    std::string zone = out->zone_name;
    const date::time_zone* tz = out->zone;
    Parser sub(line, error_);
    if (!sub.Parse(out)) return false;  // cannot fail: the lines above are valid
    out->zone_name = std::move(zone);
    out->zone = tz;
    return true;
  }
  return Fail("unknown nickname: '" + Shown(word) + "'", pos,
              "allowed @yearly @annually @monthly @weekly @daily @midnight @hourly");
}

bool Parser::Parse(CronExpr* out) {
  *out = CronExpr{};
  if (text_.size() > kMaxText) {
    if (error_)
      *error_ = "cron: expression too long: " + std::to_string(text_.size()) + " characters (allowed up to " +
                std::to_string(kMaxText) + ")";
    return false;
  }
  size_t i = 0;
  while (i < text_.size() && IsSpace(text_[i])) ++i;

  // CRON_TZ=Zone / TZ=Zone prefix (cronie's spelling and the common short one).
  for (std::string_view prefix : {std::string_view("CRON_TZ="), std::string_view("TZ=")}) {
    if (text_.substr(i, prefix.size()) != prefix) continue;
    const size_t zone_at = i + prefix.size();
    size_t zone_end = zone_at;
    while (zone_end < text_.size() && !IsSpace(text_[zone_end])) ++zone_end;
    const std::string_view name = text_.substr(zone_at, zone_end - zone_at);
    if (name.empty())
      return Fail("missing time zone after " + std::string(prefix), zone_at,
                  "allowed an IANA zone name such as Europe/Paris");
    std::string why;
    out->zone = FindZone(name, &why);
    if (!out->zone)
      return Fail("unknown time zone: '" + Shown(name) + "'", zone_at,
                  "allowed an IANA zone name such as Europe/Paris");
    out->zone_name = std::string(name);
    i = zone_end;
    while (i < text_.size() && IsSpace(text_[i])) ++i;
    if (i == text_.size()) return Fail("missing fields after " + std::string(prefix) + Shown(name), i, kFieldCountHelp);
    break;
  }

  for (size_t j = i; j < text_.size();) {
    const size_t begin = j;
    while (j < text_.size() && !IsSpace(text_[j])) ++j;
    fields_.emplace_back(begin, j);
    while (j < text_.size() && IsSpace(text_[j])) ++j;
  }
  if (fields_.empty()) return Fail("empty expression", i, kFieldCountHelp);
  if (text_[fields_[0].first] == '@') {
    const std::string_view word = text_.substr(fields_[0].first, fields_[0].second - fields_[0].first);
    if (fields_.size() > 1)
      return Fail("unexpected text after " + Shown(word) + ": '" +
                      Shown(text_.substr(fields_[1].first, fields_[1].second - fields_[1].first)) + "'",
                  fields_[1].first, "allowed a nickname alone");
    return ParseNickname(word, fields_[0].first, out);
  }
  if (fields_.size() < 5 || fields_.size() > 7)
    return Fail("wrong number of fields: " + std::to_string(fields_.size()),
                fields_.size() > 7 ? fields_[7].first : fields_[0].first, kFieldCountHelp);
  return ParseFields(out);
}

// `0 0 9 * * 1-5` runs Sunday to Thursday in Quartz and Monday to Friday in
// node-cron and croner, which read 6 fields with Vixie day numbers. Quartz
// itself refuses it (one day field must be '?'), so we refuse it too, and
// give the spellings that mean the same in every dialect: '?' and day names
// (numbers read the node-cron way, as a Node user most likely meant them),
// or 5 fields when there are no seconds, year or Quartz-only day forms.
bool Parser::FailAmbiguousDays(const std::string_view* texts, size_t pos) {
  const std::string_view dow = texts[kDow];
  std::string names;
  for (Field f : {kSecond, kMinute, kHour, kDom, kMonth, kDow, kYear}) {
    if (f == kYear && texts[f].empty()) break;
    if (!names.empty()) names += ' ';
    names += f == kDom ? std::string("?") : f == kDow ? DayNames(dow) : Shown(texts[f]);
  }
  std::string msg = "day-of-week '" + Shown(dow) + "' at position " + std::to_string(pos + 1) +
                    " is ambiguous with day-of-month '*': Quartz (6-7 fields) counts 1 = SUN, node-cron and "
                    "croner count 1 = MON. Write \"" +
                    names + "\" (names)";
  const bool five = texts[kSecond] == "0" && (texts[kYear].empty() || texts[kYear] == "*") &&
                    dow.find_first_of("Ll#") == std::string_view::npos;
  if (five) {
    msg += ", or use 5 fields (\"" + Shown(texts[kMinute]) + ' ' + Shown(texts[kHour]) + " * " + Shown(texts[kMonth]) +
           ' ' + Shown(dow) + "\")";
  }
  if (error_) *error_ = "cron: " + msg;
  return false;
}

bool Parser::ParseFields(CronExpr* out) {
  dialect_ = fields_.size() == 5 ? CronDialect::kVixie : CronDialect::kQuartz;
  const bool quartz = dialect_ == CronDialect::kQuartz;
  out->dialect = dialect_;
  // Vixie has no seconds field (always 0) and no year field.
  static constexpr Field kQuartzOrder[] = {kSecond, kMinute, kHour, kDom, kMonth, kDow, kYear};
  static constexpr Field kVixieOrder[] = {kMinute, kHour, kDom, kMonth, kDow};
  FieldSet sets[7];
  std::string_view texts[7];
  size_t starts[7] = {};
  for (size_t n = 0; n < fields_.size(); ++n) {
    const Field f = quartz ? kQuartzOrder[n] : kVixieOrder[n];
    const auto [b, e] = fields_[n];
    texts[f] = text_.substr(b, e - b);
    starts[f] = b;
    if (!ParseField(f, b, e, &sets[f])) return false;
  }
  if (!quartz) {
    texts[kSecond] = "0";
    sets[kSecond].Set(0, 0);
  }

  // Day fields. Quartz takes '?' in exactly one of them; we also accept a
  // plain '*' beside a restricted field (it restricts nothing, so there is no
  // ambiguity), which lets `* * * * * *` and `0 0 12 * * MON` parse, but not
  // beside day numbers: see FailAmbiguousDays.
  const std::string_view dom = texts[kDom], dow = texts[kDow];
  if (quartz) {
    if (sets[kDom].question && sets[kDow].question)
      return Fail("day-of-month and day-of-week are both '?'", starts[kDow], "allowed '?' in exactly one of them");
    if (!sets[kDom].question && !sets[kDow].question && dom != "*" && dow != "*")
      return Fail("day-of-month and day-of-week are both set: '" + Shown(dom) + "' and '" + Shown(dow) + "'",
                  starts[kDow], "allowed '?' (or '*') in one of them");
    if (dom == "*" && !sets[kDow].question && NumericDays(dow)) return FailAmbiguousDays(texts, starts[kDow]);
    out->dom_all = dom == "*" || dom == "?";
    out->dow_all = dow == "*" || dow == "?";
  } else {
    // Vixie: a field "is restricted" unless it begins with '*' (so */2 counts
    // as unrestricted and is ANDed, as in Vixie cron itself).
    out->day_or = dom[0] != '*' && dow[0] != '*';
    out->dom_all = dom == "*";
    out->dow_all = dow == "*";
  }

  for (int s = 0; s < 60; ++s) {
    if (sets[kSecond].Has(s, 0)) out->seconds |= uint64_t{1} << s;
    if (sets[kMinute].Has(s, 0)) out->minutes |= uint64_t{1} << s;
  }
  for (int h = 0; h < 24; ++h)
    if (sets[kHour].Has(h, 0)) out->hours |= uint32_t{1} << h;
  for (int d = 1; d <= 31; ++d)
    if (sets[kDom].Has(d, 1)) out->days |= uint32_t{1} << d;
  for (int m = 1; m <= 12; ++m)
    if (sets[kMonth].Has(m, 1)) out->months |= uint16_t(1u << m);
  const Range dr = TextRange(kDow, dialect_);
  for (int v = dr.lo; v <= dr.hi; ++v)
    if (sets[kDow].Has(v, dr.lo)) out->weekdays |= uint8_t(1u << (quartz ? v - 1 : v % 7));
  if (!texts[kYear].empty()) {
    out->years = sets[kYear].bits;
    out->any_year = texts[kYear] == "*";
  }
  out->last_minus = sets[kDom].last_minus;
  out->nearest_weekday = sets[kDom].nearest_weekday;
  out->last_minus_weekday = sets[kDom].last_minus_weekday;
  out->last_weekday = sets[kDow].last_weekday;
  out->nth = sets[kDow].nth;
  if (sets[kDom].question) out->days = 0;
  if (sets[kDow].question) out->weekdays = 0;
  for (int first = 0; first < 7; ++first) {
    uint32_t mask = 0;
    for (int d = 1; d <= 31; ++d)
      if ((out->weekdays >> ((first + d - 1) % 7)) & 1) mask |= uint32_t{1} << d;
    out->dow_masks[first] = mask;
  }

  auto is_interval = [](std::string_view t) { return t.find_first_of("*-/") != std::string_view::npos; };
  out->interval = is_interval(texts[kSecond]) || is_interval(texts[kMinute]) || is_interval(texts[kHour]);
  return true;
}

std::vector<int> Bits(uint64_t mask, int lo, int hi) {
  std::vector<int> v;
  for (int i = lo; i <= hi; ++i)
    if ((mask >> i) & 1) v.push_back(i);
  return v;
}

}  // namespace

bool ParseCron(std::string_view text, CronExpr* out, std::string* error) {
  CronExpr parsed;
  Parser parser(text, error);
  if (!parser.Parse(&parsed)) return false;
  *out = std::move(parsed);
  return true;
}

CronDescription DescribeCron(const CronExpr& e) {
  CronDescription d;
  d.dialect = e.dialect == CronDialect::kQuartz ? "quartz" : "vixie";
  d.zone = e.zone_name;
  d.seconds = Bits(e.seconds, 0, 59);
  d.minutes = Bits(e.minutes, 0, 59);
  d.hours = Bits(e.hours, 0, 23);
  d.days_of_month = Bits(e.days, 1, 31);
  d.months = Bits(e.months, 1, 12);
  d.days_of_week = Bits(e.weekdays, 0, 6);
  if (!e.any_year)
    for (int y = kCronMinYear; y <= kCronMaxYear; ++y) {
      const int i = y - kCronMinYear;
      if ((e.years[i >> 6] >> (i & 63)) & 1) d.years.push_back(y);
    }
  d.every_day_of_month = e.dom_all;
  d.every_day_of_week = e.dow_all;
  d.last_day_offsets = Bits(e.last_minus, 0, 30);
  d.nearest_weekdays = Bits(e.nearest_weekday, 1, 31);
  d.last_weekday_offsets = Bits(e.last_minus_weekday, 0, 30);
  d.last_days_of_week = Bits(e.last_weekday, 0, 6);
  for (int w = 0; w < 7; ++w)
    for (int k = 1; k <= 5; ++k)
      if ((e.nth[w] >> k) & 1) d.nth_days_of_week.emplace_back(w, k);
  d.day_or = e.day_or;
  d.interval = e.interval;
  return d;
}

}  // namespace lua_tasks
