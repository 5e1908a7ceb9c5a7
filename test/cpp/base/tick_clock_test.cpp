// SPDX-License-Identifier: MIT
// Tests for TickClock over a fake counter and clock: when it reads the real
// clock, how close its derived times are, and what it does when the counter
// misbehaves.
#include "core/base/tick_clock.hpp"

#include <chrono>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <gtest/gtest.h>

#include "core/base/clock.hpp"

namespace lua_tasks {
namespace {

// True time in ns; the counter is offset + true time × rate. Reading the
// real clock costs read_ns of true time.
struct World {
  double ns = 5e9;
  double rate = 3.0;  // ticks a ns
  double offset = 1e12;
  double read_ns = 20;
  int real_reads = 0;
  int tick_reads = 0;

  uint64_t ticks() const { return static_cast<uint64_t>(offset + ns * rate); }
  // From now on the counter runs `factor` times as fast, without a jump.
  void ChangePace(double factor) {
    offset -= ns * rate * (factor - 1);
    rate *= factor;
  }
};

struct FakeTicks {
  World* w;
  bool usable = true;
  uint64_t Ticks() const {
    ++w->tick_reads;
    return w->ticks();
  }
  int64_t Ns() const {
    ++w->real_reads;
    w->ns += w->read_ns;
    return static_cast<int64_t>(w->ns);
  }
};

using FakeTickClock = TickClock<FakeTicks>;

// Reads once every step_ns of true time (the cost of real reads included)
// for until_ns.
void ReadFor(FakeTickClock& c, World& w, double step_ns, double until_ns) {
  const double start = w.ns;
  const int64_t n = static_cast<int64_t>(until_ns / step_ns);
  for (int64_t i = 0; i < n; ++i) {
    c.Now();
    w.ns = std::max(w.ns, start + static_cast<double>(i + 1) * step_ns);
  }
}

// Reads every µs for 30 ms, past the first measure of the rate: whether the
// clock is rated then. (Locals in each test, not a fixture: GCC 12 at -O3
// hoisted the fake counter's read out of ReadFor's loop when the clock and
// its World were members of one fixture; see the session 8 note.)
bool Rated(FakeTickClock& c, World& w) {
  ReadFor(c, w, 1000, 30e6);
  return c.rated();
}

TEST(TickClock, WithoutAUsableCounterEveryReadIsReal) {
  World w;
  FakeTickClock c(FakeTicks{&w, false});
  ReadFor(c, w, 1000, 100e6);
  EXPECT_FALSE(c.rated());
  EXPECT_EQ(w.tick_reads, 0);
  EXPECT_EQ(w.real_reads, 100'000);
}

TEST(TickClock, ReadsRealTimeUntilTheRateIsMeasuredThenAboutOnceAnAnchor) {
  World w;
  FakeTickClock c(FakeTicks{&w});
  ReadFor(c, w, 1000, 19e6);  // under kFirstCalibrationNs: every read is real
  EXPECT_FALSE(c.rated());
  EXPECT_EQ(w.real_reads, 19'000);
  ReadFor(c, w, 1000, 2e6);
  ASSERT_TRUE(c.rated());
  EXPECT_NEAR(c.ns_per_tick(), 1 / 3.0, 1e-6);
  w.real_reads = 0;
  ReadFor(c, w, 1000, 100e6);  // 100,000 reads, 1,000 anchor spans
  EXPECT_GE(w.real_reads, 990);
  EXPECT_LE(w.real_reads, 1010);
}

TEST(TickClock, DerivedTimesAreWithinNanosecondsOfTheRealClock) {
  World w;
  FakeTickClock c(FakeTicks{&w});
  ASSERT_TRUE(Rated(c, w));
  double worst = 0;
  for (int i = 0; i < 100'000; ++i) {
    const double got = static_cast<double>(c.Now());
    worst = std::max(worst, std::fabs(got - w.ns));
    w.ns += 777;
  }
  EXPECT_LT(worst, 25);  // the fake real read itself moves time by 20 ns
}

// A real read that is slow (interrupted before it samples the clock): the
// counter read after it must stamp the anchor, or derived times run ahead of
// the real clock, and a timer could fire before its deadline.
TEST(TickClock, NeverRunsAheadOfTheRealClockWhenARealReadIsSlow) {
  World w;
  w.read_ns = 1000;  // 3,000 ticks: still taken as an anchor
  FakeTickClock c(FakeTicks{&w});
  ReadFor(c, w, 5000, 30e6);
  ASSERT_TRUE(c.rated());
  for (int i = 0; i < 100'000; ++i) {
    const double got = static_cast<double>(c.Now());
    ASSERT_LE(got, w.ns + 1) << "read " << i << " ahead by " << got - w.ns;
    w.ns += 333;
  }
}

TEST(TickClock, NeverGoesBack) {
  World w;
  FakeTickClock c(FakeTicks{&w});
  ASSERT_TRUE(Rated(c, w));
  // The counter speeds up by 0.5%: derived times run ahead of real ones,
  // and each anchor's real read comes in below what was served.
  w.ChangePace(1.005);
  int64_t last = c.Now();
  for (int i = 0; i < 200'000; ++i) {
    w.ns += 99;
    const int64_t now = c.Now();
    ASSERT_GE(now, last) << "read " << i;
    last = now;
  }
  EXPECT_TRUE(c.rated());  // 0.5% is within what a slewed clock may do
}

TEST(TickClock, ADerivedTimeIsNeverMoreThanAnAnchorSpanAheadOfItsAnchor) {
  World w;
  FakeTickClock c(FakeTicks{&w});
  ASSERT_TRUE(Rated(c, w));
  const int64_t anchor = c.Now();
  // The counter races ahead 1,000 times too fast, without the real clock.
  w.ChangePace(1000);
  w.real_reads = 0;
  int64_t last = anchor;
  for (int i = 0; i < 1000 && w.real_reads == 0; ++i) {
    w.ns += 1;
    last = c.Now();
  }
  EXPECT_EQ(w.real_reads, 1);  // the span ran out: a real read
  EXPECT_LE(last - anchor, FakeTickClock::kAnchorNs + 1000);
}

TEST(TickClock, ACounterThatJumpsLosesItsRateUntilMeasuredAgain) {
  World w;
  FakeTickClock c(FakeTicks{&w});
  ASSERT_TRUE(Rated(c, w));
  w.offset += 3e12;  // jumps 1,000 s ahead
  const int64_t before = static_cast<int64_t>(w.ns);
  const int64_t got = c.Now();
  EXPECT_FALSE(c.rated());
  EXPECT_NEAR(static_cast<double>(got), static_cast<double>(before), 100);
  w.real_reads = 0;
  ReadFor(c, w, 1000, 10e6);
  EXPECT_EQ(w.real_reads, 10'000);  // every read real while it measures again
  ReadFor(c, w, 1000, 20e6);
  EXPECT_TRUE(c.rated());
}

TEST(TickClock, ACounterThatGoesBackTakesARealRead) {
  World w;
  FakeTickClock c(FakeTicks{&w});
  ASSERT_TRUE(Rated(c, w));
  const int64_t before = c.Now();
  w.offset -= 1e9;  // as if on a core whose counter is behind
  w.ns += 10;
  w.real_reads = 0;
  const int64_t got = c.Now();
  EXPECT_EQ(w.real_reads, 1);
  EXPECT_GE(got, before);
  EXPECT_NEAR(static_cast<double>(got), w.ns, 100);
  EXPECT_FALSE(c.rated());
}

TEST(TickClock, ACounterThatStandsStillIsNeverRated) {
  World w;
  w.rate = 0;
  FakeTickClock c(FakeTicks{&w});
  ReadFor(c, w, 1000, 100e6);
  EXPECT_FALSE(c.rated());
  EXPECT_EQ(w.real_reads, 100'000);
}

TEST(TickClock, AnInterruptedRealReadIsServedButNotAnAnchor) {
  World w;
  w.read_ns = 10'000;  // 30,000 ticks between the two counter reads
  FakeTickClock c(FakeTicks{&w});
  ReadFor(c, w, 1000, 100e6);
  EXPECT_FALSE(c.rated());
}

TEST(TickClock, FollowsASlewedRealClock) {
  World w;
  FakeTickClock c(FakeTicks{&w});
  ASSERT_TRUE(Rated(c, w));
  // The real clock is slewed 200 ppm slower against the counter (NTP).
  w.ChangePace(1.0002);
  ReadFor(c, w, 5000, 2.5e9);  // past a recalibration
  EXPECT_TRUE(c.rated());
  EXPECT_NEAR(c.ns_per_tick(), 1 / 3.0006, 1e-6);
  double worst = 0;
  for (int i = 0; i < 10'000; ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(c.Now()) - w.ns));
    w.ns += 333;
  }
  EXPECT_LT(worst, 25);
}

// On this machine's own counter, if it has a usable one: every reading lies
// between real reads taken just before and after it.
TEST(SystemClock, AgreesWithTheMonotonicClock) {
  const auto steady = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  SystemClock clock;
  int64_t last = 0;
  const int64_t end = steady() + 60'000'000;  // past the first calibration
  int64_t reads = 0;
  while (true) {
    const int64_t before = steady();
    const int64_t got = clock.MonoNs();
    const int64_t after = steady();
    ASSERT_GE(got, last);
    // Behind by at most an interrupted bracket and the rate error allowed
    // before it re-measures; ahead by no more than the rate's error over a
    // span (nanoseconds).
    ASSERT_GE(got, before - TickClock<SystemTicks>::kMaxMissNs - 5000) << "read " << reads;
    ASSERT_LE(got, after + 1000) << "read " << reads;
    last = got;
    ++reads;
    if (before > end) break;
  }
}

}  // namespace
}  // namespace lua_tasks
