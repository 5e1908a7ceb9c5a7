// SPDX-License-Identifier: MIT
// PatternMatcher: Lua 5.4 patterns (reference manual §6.4.1), matched in steps that can be stopped.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace lua_tasks {

// Why our own matcher: Lua's runs a whole string.find/match/gmatch/gsub in
// one C call, out of the CPU budget's count hook's reach, and backtracking
// makes some patterns take minutes ("a-a-a-...b" on a long run of "a").
// This one gives the same results and raises the same errors as Lua 5.4.4's
// (the same 200-deep nesting limit, 32 captures, errors found only when the
// match reaches them), and asks a stop callback every kCheckEvery steps
// (a step: one pattern item tried, one character scanned). When the callback
// says stop, every level returns at once and the search ends with kStopped.
//
// No Lua API in here: the caller turns an Error or kStopped into a raise.
// Trivially destructible on purpose: it lives in lua_CFunction frames across
// Lua calls that may longjmp (gsub's replacement function).
class PatternMatcher {
 public:
  static constexpr int kMaxCaptures = 32;  // LUA_MAXCAPTURES
  static constexpr int kMaxDepth = 200;    // nested item matches before "pattern too complex" (5.4.4)
  static constexpr int kCheckEvery = 1000;
  // Capture::len for a capture still open, and for a position capture "()".
  static constexpr ptrdiff_t kOpen = -1;
  static constexpr ptrdiff_t kPosition = -2;

  // Returns true when the match must stop.
  using StopFn = bool (*)(void* ctx);

  enum class Status : uint8_t { kNoMatch, kMatch, kError, kStopped };
  enum class Error : uint8_t {
    kNone,
    kEndsWithEscape,   // "malformed pattern (ends with '%')"
    kMissingBracket,   // "malformed pattern (missing ']')"
    kFrontierBracket,  // "missing '[' after '%f' in pattern"
    kBalanceArgs,      // "malformed pattern (missing arguments to '%b')"
    kCaptureIndex,     // "invalid capture index %N" (N in error_index())
    kPatternCapture,   // "invalid pattern capture": a ')' with no open capture
    kTooManyCaptures,  // "too many captures"
    kTooComplex,       // "pattern too complex"
  };

  struct Capture {
    const char* start;
    ptrdiff_t len;  // or kOpen / kPosition
  };

  // Subject and pattern must outlive the matcher. `pattern` is the text after
  // any anchor '^' the caller handles. `stop` may be null (never stops).
  PatternMatcher(const char* subject, size_t subject_len, const char* pattern, size_t pattern_len, StopFn stop,
                 void* stop_ctx)
      : src_(subject),
        src_end_(subject + subject_len),
        pat_(pattern),
        pat_end_(pattern + pattern_len),
        stop_(stop),
        stop_ctx_(stop_ctx) {}

  // Finds the first start at or after `from` (a byte offset, at most the
  // subject's length) where the pattern matches, trying only `from` when
  // `anchored`, and passing over a match that ends at `skip_end` (gmatch and
  // gsub skip an empty match right after the previous one). On kMatch,
  // start()/end() and the captures describe the match.
  Status Search(size_t from, bool anchored, const char* skip_end);

  const char* start() const { return match_start_; }
  const char* end() const { return match_end_; }
  int captures() const { return ncap_; }
  const Capture& capture(int i) const { return caps_[i]; }
  const char* subject() const { return src_; }
  Error error() const { return error_; }
  int error_index() const { return error_index_; }

 private:
  bool halted() const { return halt_ != Status::kNoMatch; }
  // Counts a step; false once the match must unwind.
  bool Step() { return --countdown_ > 0 || Checkpoint(); }
  bool Checkpoint();
  // A scan of [from, to) (a set, the pattern for an item's end, memchr,
  // memcmp) counts a step per 64 bytes, so a huge set or capture cannot hide
  // seconds of work between checks. Capped: the next Step checks anyway.
  void ChargeScan(const char* from, const char* to) {
    countdown_ -= static_cast<int>(std::min<ptrdiff_t>((to - from) / 64, kCheckEvery));
  }
  const char* Fail(Error e, int index = 0);

  const char* FirstItemEnd();
  const char* NextCandidate(const char* s, const char* first_end);
  static const char* ScanItem(const char* p, const char* pat_end, Error* error);
  const char* Match(const char* s, const char* p);
  const char* ItemEnd(const char* p);
  bool ItemMatches(unsigned char c, const char* p, const char* item_end);
  const char* Greedy(const char* s, const char* p, const char* item_end);
  const char* Lazy(const char* s, const char* p, const char* item_end);
  const char* OpenCapture(const char* s, const char* p, ptrdiff_t kind);
  const char* CloseCapture(const char* s, const char* p);
  const char* Balanced(const char* s, const char* p);
  const char* BackReference(const char* s, char digit);

  const char* src_;
  const char* src_end_;
  const char* pat_;
  const char* pat_end_;
  StopFn stop_;
  void* stop_ctx_;
  int countdown_ = kCheckEvery;
  int depth_ = 0;
  int ncap_ = 0;
  Status halt_ = Status::kNoMatch;  // kError or kStopped once halted
  Error error_ = Error::kNone;
  int error_index_ = 0;
  const char* match_start_ = nullptr;
  const char* match_end_ = nullptr;
  Capture caps_[kMaxCaptures];  // [0, ncap_) are set
};

static_assert(std::is_trivially_destructible_v<PatternMatcher>);

// Whether `pattern` holds any of Lua's special characters; string.find with
// none searches for it as plain text, as Lua's does.
bool HasPatternSpecials(const char* pattern, size_t len);

// Plain substring search from byte `from` (at most hay_len). Returns the
// offset of the first occurrence, or -1; kFindStopped when `stop` said stop.
// Linear, but about 3 ns a byte: over a long subject the stop is asked
// between windows of kFindWindow bytes (or 4 needles, if longer).
constexpr ptrdiff_t kFindStopped = -2;
constexpr size_t kFindWindow = size_t{1} << 20;
ptrdiff_t FindPlain(const char* hay, size_t hay_len, size_t from, const char* needle, size_t needle_len,
                    PatternMatcher::StopFn stop, void* stop_ctx);

}  // namespace lua_tasks
