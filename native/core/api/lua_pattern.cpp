// SPDX-License-Identifier: MIT
// PatternMatcher: Lua 5.4 patterns (reference manual §6.4.1), matched in steps that can be stopped.
//
// A backtracking matcher over the pattern text, with no compile step (errors
// must appear only when a match reaches the faulty item, as in Lua). Match(s,
// p) matches the rest of the pattern from p against the subject from s and
// returns where the match ends, or null. Simple items advance in a loop; the
// constructs that must try alternatives (the quantifiers, captures, which
// undo themselves when what follows fails) recurse, and that recursion is
// what Lua 5.4.4 bounds at 200 levels: we count the same calls.
//
// Character classes are the C locale's (bytes 128-255 belong to none, as for
// Lua under the C locale), from a table rather than <cctype>, so a locale set
// by the embedder changes nothing.
#include "core/api/lua_pattern.hpp"

#include <algorithm>
#include <cstring>

namespace lua_tasks {

namespace {

enum ClassBit : uint16_t {
  kAlpha = 1 << 0,
  kCntrl = 1 << 1,
  kDigit = 1 << 2,
  kGraph = 1 << 3,
  kLower = 1 << 4,
  kPunct = 1 << 5,
  kSpace = 1 << 6,
  kUpper = 1 << 7,
  kXdigit = 1 << 8,
  kZero = 1 << 9,         // %z: Lua 5.1's class for '\0', still accepted by 5.4
  kComplement = 1 << 15,  // in `letter` only: an upper-case class letter
};

struct ClassTable {
  uint16_t bits[256];    // the classes each byte is in
  uint16_t letter[256];  // what "%<byte>" stands for; 0 when it is the byte itself
};

constexpr ClassTable MakeClassTable() {
  ClassTable t{};
  for (int c = 0; c < 256; ++c) {
    uint16_t b = 0;
    const bool upper = c >= 'A' && c <= 'Z';
    const bool lower = c >= 'a' && c <= 'z';
    const bool digit = c >= '0' && c <= '9';
    const bool graph = c >= 0x21 && c <= 0x7e;
    if (upper) b |= kUpper | kAlpha;
    if (lower) b |= kLower | kAlpha;
    if (digit) b |= kDigit;
    if (graph) b |= kGraph;
    if (graph && !upper && !lower && !digit) b |= kPunct;
    if (c < 0x20 || c == 0x7f) b |= kCntrl;
    if (c == ' ' || (c >= '\t' && c <= '\r')) b |= kSpace;
    if (digit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')) b |= kXdigit;
    if (c == 0) b |= kZero;
    t.bits[c] = b;
  }
  struct Letter {
    char name;
    uint16_t bits;
  };
  constexpr Letter kLetters[] = {{'a', kAlpha},          {'c', kCntrl},  {'d', kDigit}, {'g', kGraph},
                                 {'l', kLower},          {'p', kPunct},  {'s', kSpace}, {'u', kUpper},
                                 {'w', kAlpha | kDigit}, {'x', kXdigit}, {'z', kZero}};
  for (const Letter& l : kLetters) {
    t.letter[static_cast<unsigned char>(l.name)] = l.bits;
    t.letter[static_cast<unsigned char>(l.name - 'a' + 'A')] = l.bits | kComplement;
  }
  return t;
}

constexpr ClassTable kClasses = MakeClassTable();

// "%<cls>" against c: a class (upper case for its complement), or any other
// character standing for itself.
bool ClassMatches(unsigned char c, unsigned char cls) {
  const uint16_t want = kClasses.letter[cls];
  if (want == 0) return cls == c;
  const bool in = (kClasses.bits[c] & want & ~kComplement) != 0;
  return (want & kComplement) != 0 ? !in : in;
}

// A set "[...]": `open` is its '[' and `close` its final ']'. Inside, "%x"
// is a class or an escaped character, "a-z" a range (a '-' with nothing
// before the ']' after it is itself), anything else itself; a leading '^'
// complements the set.
bool SetMatches(unsigned char c, const char* open, const char* close) {
  const char* q = open + 1;
  bool in = true;
  if (*q == '^') {
    in = false;
    ++q;
  }
  while (q < close) {
    if (*q == '%') {
      if (ClassMatches(c, static_cast<unsigned char>(q[1]))) return in;
      q += 2;
    } else if (q[1] == '-' && q + 2 < close) {
      if (static_cast<unsigned char>(q[0]) <= c && c <= static_cast<unsigned char>(q[2])) return in;
      q += 3;
    } else {
      if (static_cast<unsigned char>(*q) == c) return in;
      ++q;
    }
  }
  return !in;
}

}  // namespace

bool PatternMatcher::Checkpoint() {
  countdown_ = kCheckEvery;
  if (halted()) return false;
  if (stop_ != nullptr && stop_(stop_ctx_)) halt_ = Status::kStopped;
  return !halted();
}

const char* PatternMatcher::Fail(Error e, int index) {
  if (!halted()) {
    halt_ = Status::kError;
    error_ = e;
    error_index_ = index;
  }
  return nullptr;
}

PatternMatcher::Status PatternMatcher::Search(size_t from, bool anchored, const char* skip_end) {
  const char* first_end = anchored ? nullptr : FirstItemEnd();
  for (const char* s = src_ + from; s <= src_end_; ++s) {
    if (first_end != nullptr) {
      s = NextCandidate(s, first_end);
      if (s == nullptr) return halted() ? halt_ : Status::kNoMatch;
    }
    ncap_ = 0;
    depth_ = 0;
    const char* e = Match(s, pat_);
    if (halted()) return halt_;
    if (e != nullptr && e != skip_end) {
      match_start_ = s;
      match_end_ = e;
      return Status::kMatch;
    }
    if (anchored) break;
  }
  return Status::kNoMatch;
}

// When the pattern starts with an item that must match one character (a
// character, '.', a class or a set, with no '*', '?' or '-' after it), a
// match can only start where that item matches: anywhere else Match fails on
// it before it reaches anything (an error included). Returns that item's
// end, or null when the pattern starts otherwise.
const char* PatternMatcher::FirstItemEnd() {
  const char* p = pat_;
  if (p == pat_end_ || *p == '(' || *p == ')' || (*p == '$' && p + 1 == pat_end_)) return nullptr;
  if (*p == '%' && p + 1 < pat_end_ && (p[1] == 'b' || p[1] == 'f' || (p[1] >= '0' && p[1] <= '9'))) return nullptr;
  const char* ep = ScanItem(p, pat_end_, nullptr);
  if (ep != nullptr) ChargeScan(p, ep);
  if (ep == nullptr || (ep < pat_end_ && (*ep == '*' || *ep == '?' || *ep == '-'))) return nullptr;
  return ep;
}

// The first start from s where the first item matches, or null when none is
// left (or the stop callback said stop).
const char* PatternMatcher::NextCandidate(const char* s, const char* first_end) {
  if (*pat_ != '.' && *pat_ != '%' && *pat_ != '[') {  // a plain character: memchr finds it
    const void* at = std::memchr(s, *pat_, static_cast<size_t>(src_end_ - s));
    ChargeScan(s, at != nullptr ? static_cast<const char*>(at) : src_end_);
    return at == nullptr || !Step() ? nullptr : static_cast<const char*>(at);
  }
  for (; s < src_end_; ++s) {
    if (ItemMatches(static_cast<unsigned char>(*s), pat_, first_end)) return s;
    if (!Step()) return nullptr;
  }
  return nullptr;
}

const char* PatternMatcher::ScanItem(const char* p, const char* pat_end, Error* error) {
  const char c = *p++;
  if (c == '%') {
    if (p == pat_end) {
      if (error != nullptr) *error = Error::kEndsWithEscape;
      return nullptr;
    }
    return p + 1;
  }
  if (c != '[') return p;
  if (p < pat_end && *p == '^') ++p;
  // The first character is a member even when it is ']'; "%]" is one too.
  for (;;) {
    if (p == pat_end) {
      if (error != nullptr) *error = Error::kMissingBracket;
      return nullptr;
    }
    if (*p++ == '%' && p < pat_end) ++p;
    if (p < pat_end && *p == ']') return p + 1;
  }
}

// The end of the single-character item at p: past "%x", past a whole set, or
// p + 1. Null (an error) for a '%' ending the pattern or a set with no ']'.
const char* PatternMatcher::ItemEnd(const char* p) {
  Error error = Error::kNone;
  const char* ep = ScanItem(p, pat_end_, &error);
  if (ep == nullptr) return Fail(error);
  ChargeScan(p, ep);
  return ep;
}

bool PatternMatcher::ItemMatches(unsigned char c, const char* p, const char* item_end) {
  switch (*p) {
    case '.':
      return true;
    case '%':
      return ClassMatches(c, static_cast<unsigned char>(p[1]));
    case '[':
      ChargeScan(p, item_end);
      return SetMatches(c, p, item_end - 1);
    default:
      return static_cast<unsigned char>(*p) == c;
  }
}

const char* PatternMatcher::Match(const char* s, const char* p) {
  if (depth_ == kMaxDepth) return Fail(Error::kTooComplex);
  ++depth_;
  const char* result = nullptr;
  for (;;) {
    if (!Step()) break;
    if (p == pat_end_) {
      result = s;
      break;
    }
    const char next = p + 1 < pat_end_ ? p[1] : '\0';  // '\0' past the end: no construct
    if (*p == '(') {
      result = next == ')' ? OpenCapture(s, p + 2, kPosition) : OpenCapture(s, p + 1, kOpen);
      break;
    }
    if (*p == ')') {
      result = CloseCapture(s, p + 1);
      break;
    }
    if (*p == '$' && p + 1 == pat_end_) {  // '$' elsewhere is itself
      result = s == src_end_ ? s : nullptr;
      break;
    }
    if (*p == '%' && next == 'b') {
      s = Balanced(s, p + 2);
      if (s == nullptr) break;
      p += 4;
      continue;
    }
    if (*p == '%' && next == 'f') {
      p += 2;
      if (p == pat_end_ || *p != '[') {
        Fail(Error::kFrontierBracket);
        break;
      }
      const char* set_end = ItemEnd(p);
      if (set_end == nullptr) break;
      // The subject has a '\0' before its start and after its end.
      const auto before = static_cast<unsigned char>(s == src_ ? '\0' : s[-1]);
      const auto here = static_cast<unsigned char>(s == src_end_ ? '\0' : *s);
      ChargeScan(p, set_end);
      if (SetMatches(before, p, set_end - 1) || !SetMatches(here, p, set_end - 1)) break;
      p = set_end;
      continue;
    }
    if (*p == '%' && next >= '0' && next <= '9') {
      s = BackReference(s, next);
      if (s == nullptr) break;
      p += 2;
      continue;
    }
    // A single-character item, maybe with a quantifier.
    const char* ep = ItemEnd(p);
    if (ep == nullptr) break;
    const char quant = ep < pat_end_ ? *ep : '\0';
    const bool hit = s < src_end_ && ItemMatches(static_cast<unsigned char>(*s), p, ep);
    if (!hit) {
      if (quant == '*' || quant == '?' || quant == '-') {  // zero occurrences will do
        p = ep + 1;
        continue;
      }
      break;
    }
    if (quant == '?') {
      result = Match(s + 1, ep + 1);
      if (result != nullptr || halted()) break;
      p = ep + 1;  // without it
      continue;
    }
    if (quant == '+') {
      result = Greedy(s + 1, p, ep);
      break;
    }
    if (quant == '*') {
      result = Greedy(s, p, ep);
      break;
    }
    if (quant == '-') {
      result = Lazy(s, p, ep);
      break;
    }
    ++s;
    p = ep;
  }
  --depth_;
  return result;
}

// As many items as possible from s, then fewer until the rest matches.
const char* PatternMatcher::Greedy(const char* s, const char* p, const char* item_end) {
  ptrdiff_t n = 0;
  while (s + n < src_end_ && ItemMatches(static_cast<unsigned char>(s[n]), p, item_end)) {
    ++n;
    if (!Step()) return nullptr;
  }
  for (; n >= 0; --n) {
    const char* e = Match(s + n, item_end + 1);
    if (e != nullptr || halted()) return e;
  }
  return nullptr;
}

// As few items as possible: the rest is tried before each one more.
const char* PatternMatcher::Lazy(const char* s, const char* p, const char* item_end) {
  for (;;) {
    const char* e = Match(s, item_end + 1);
    if (e != nullptr || halted()) return e;
    if (s == src_end_ || !ItemMatches(static_cast<unsigned char>(*s), p, item_end)) return nullptr;
    ++s;
  }
}

const char* PatternMatcher::OpenCapture(const char* s, const char* p, ptrdiff_t kind) {
  if (ncap_ == kMaxCaptures) return Fail(Error::kTooManyCaptures);
  caps_[ncap_] = {s, kind};
  ++ncap_;
  const char* e = Match(s, p);
  if (e == nullptr) --ncap_;
  return e;
}

// Closes the innermost capture still open.
const char* PatternMatcher::CloseCapture(const char* s, const char* p) {
  int i = ncap_ - 1;
  while (i >= 0 && caps_[i].len != kOpen) --i;
  if (i < 0) return Fail(Error::kPatternCapture);
  caps_[i].len = s - caps_[i].start;
  const char* e = Match(s, p);
  if (e == nullptr) caps_[i].len = kOpen;
  return e;
}

// "%bxy" with p at x: from an x at s to the y that balances it.
const char* PatternMatcher::Balanced(const char* s, const char* p) {
  if (pat_end_ - p < 2) return Fail(Error::kBalanceArgs);
  if (s == src_end_ || *s != p[0]) return nullptr;
  const char open = p[0];
  const char close = p[1];
  int level = 1;
  while (++s < src_end_) {
    if (!Step()) return nullptr;
    if (*s == close) {
      if (--level == 0) return s + 1;
    } else if (*s == open) {
      ++level;
    }
  }
  return nullptr;
}

// "%1".."%9": the text of a closed capture again. A position capture never
// matches ("%0" and an open or missing capture are errors).
const char* PatternMatcher::BackReference(const char* s, char digit) {
  const int i = digit - '1';
  if (i < 0 || i >= ncap_ || caps_[i].len == kOpen) return Fail(Error::kCaptureIndex, i + 1);
  const ptrdiff_t len = caps_[i].len;
  if (len < 0 || src_end_ - s < len) return nullptr;
  ChargeScan(s, s + len);  // memcmp is fast, not free
  if (std::memcmp(caps_[i].start, s, static_cast<size_t>(len)) != 0) return nullptr;
  return s + len;
}

bool HasPatternSpecials(const char* pattern, size_t len) {
  for (size_t i = 0; i < len; ++i) {
    switch (pattern[i]) {
      case '^':
      case '$':
      case '*':
      case '+':
      case '?':
      case '.':
      case '(':
      case '[':
      case '%':
      case '-':
        return true;
      default:
        break;
    }
  }
  return false;
}

ptrdiff_t FindPlain(const char* hay, size_t hay_len, size_t from, const char* needle, size_t needle_len,
                    PatternMatcher::StopFn stop, void* stop_ctx) {
  if (needle_len == 0) return static_cast<ptrdiff_t>(from);
  if (needle_len > hay_len - from) return -1;
  const size_t window = std::max(kFindWindow, 4 * needle_len);
  for (size_t pos = from;;) {
    // Windows overlap by needle_len - 1 bytes, so no occurrence falls between.
    const size_t end = hay_len - pos - needle_len < window ? hay_len : pos + window + needle_len - 1;
    // glibc's memmem is the two-way algorithm: linear, whatever the input.
    const void* at = memmem(hay + pos, end - pos, needle, needle_len);
    if (at != nullptr) return static_cast<const char*>(at) - hay;
    if (end == hay_len) return -1;
    if (stop != nullptr && stop(stop_ctx)) return kFindStopped;
    pos += window;
  }
}

}  // namespace lua_tasks
