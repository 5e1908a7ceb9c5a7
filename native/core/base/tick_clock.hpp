// SPDX-License-Identifier: MIT
// TickClock: the monotonic clock in nanoseconds, read through a cheap tick
// counter (the x86 TSC) between real reads.
//
// The scheduler reads the clock once per wake: each yield's park stamp and
// the next task's wake stamp. A vDSO clock_gettime is about 24 ns, a fifth of
// an IMMEDIATE yield; the TSC is about 9. So a real read is taken at most
// every kAnchorNs of ticks (an anchor); in between, time is the anchor plus
// the ticks since, scaled by a rate measured from real reads at least
// kFirstCalibrationNs apart, then again every kRecalibrationNs.
//
// What bounds the error, whatever the counter does:
// - a derived time is at most kAnchorNs past its anchor (the span in ticks is
//   derived from the same rate), and ticks that went back or jumped take a
//   real read;
// - each anchor checks the rate's prediction against the real clock; a miss
//   beyond kMaxMissNs (plus 0.1% of the time since the last anchor, for a
//   slewed clock) drops the rate, and real reads serve until it is measured
//   again;
// - what Now returns never goes back.
// Without a usable counter (Source::usable false) every read is real.
#pragma once

#include <algorithm>
#include <cstdint>

namespace lua_tasks {

template <class Source>
class TickClock {
 public:
  static constexpr int64_t kAnchorNs = 100'000;               // 100 µs
  static constexpr int64_t kFirstCalibrationNs = 20'000'000;  // 20 ms
  static constexpr int64_t kRecalibrationNs = 1'000'000'000;  // 1 s
  static constexpr int64_t kMaxMissNs = 20'000;               // 20 µs
  // A real read whose two tick reads lie further apart than this was
  // interrupted: it is served but not used as an anchor. A vDSO read is
  // under 100 ticks; 4,000 is 1.3 µs at 3 GHz, 4 µs at 1 GHz.
  static constexpr uint64_t kMaxBracketTicks = 4'000;
  // Rates outside 0.05-20 ns a tick (20 GHz-50 MHz) are not believed.
  static constexpr double kMinNsPerTick = 0.05;
  static constexpr double kMaxNsPerTick = 20;

  explicit TickClock(Source source = Source()) : src_(source) {}

  int64_t Now() {
    if (rated_) {
      const uint64_t d = src_.Ticks() - anchor_ticks_;
      if (d < span_ticks_) return Serve(anchor_ns_ + static_cast<int64_t>((d * mult_) >> kShift));
    }
    return Anchor();
  }

  bool rated() const { return rated_; }
  double ns_per_tick() const { return static_cast<double>(mult_) / static_cast<double>(uint64_t{1} << kShift); }

 private:
  static constexpr int kShift = 32;  // mult_ is ns a tick in 32.32 fixed point

  int64_t Anchor() {
    if (!src_.usable) return Serve(src_.Ns());
    const uint64_t a = src_.Ticks();
    const int64_t ns = src_.Ns();
    const uint64_t b = src_.Ticks();
    if (b < a || b - a > kMaxBracketTicks) return Serve(ns);
    // Stamped with the later counter read: the real read happened at or
    // before it, so derived times lag the real clock by at most the bracket
    // and never run ahead of it (a timer may fire late by that, not early).
    const uint64_t t = b;
    if (rated_) {
      const double predicted = static_cast<double>(anchor_ns_) + static_cast<double>(t - anchor_ticks_) * ns_per_tick();
      const double miss = predicted - static_cast<double>(ns);
      const double allowed = static_cast<double>(kMaxMissNs) + static_cast<double>(ns - anchor_ns_) / 1000;
      if (t < anchor_ticks_ || miss > allowed || -miss > allowed) {
        rated_ = false;  // the counter jumped, stopped or changed pace: measure it again
        base_ticks_ = t;
        base_ns_ = ns;
      }
    } else if (base_ns_ < 0 || t <= base_ticks_) {
      base_ticks_ = t;
      base_ns_ = ns;
    }
    if (t > base_ticks_ && ns - base_ns_ >= (rated_ ? kRecalibrationNs : kFirstCalibrationNs)) {
      const double rate = static_cast<double>(ns - base_ns_) / static_cast<double>(t - base_ticks_);
      if (rate >= kMinNsPerTick && rate <= kMaxNsPerTick) {
        mult_ = static_cast<uint64_t>(rate * static_cast<double>(uint64_t{1} << kShift));
        span_ticks_ = static_cast<uint64_t>(static_cast<double>(kAnchorNs) / rate);
        rated_ = true;
      }
      base_ticks_ = t;
      base_ns_ = ns;
    }
    anchor_ticks_ = t;
    anchor_ns_ = ns;
    return Serve(ns);
  }

  // A real read may fall below a derived time served before it, by the
  // rate's small error: never go back.
  int64_t Serve(int64_t ns) {
    last_ = std::max(last_, ns);
    return last_;
  }

  Source src_;
  bool rated_ = false;
  uint64_t mult_ = 0;
  uint64_t span_ticks_ = 0;
  uint64_t anchor_ticks_ = 0;
  int64_t anchor_ns_ = 0;
  uint64_t base_ticks_ = 0;
  int64_t base_ns_ = -1;  // none yet
  int64_t last_ = 0;
};

}  // namespace lua_tasks
