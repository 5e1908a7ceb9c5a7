// SPDX-License-Identifier: MIT
// Clock: the scheduler's two time sources, injectable so tests can fake them.
#pragma once

#include <chrono>
#include <cstdint>
#include <utility>

#include "core/base/tick_clock.hpp"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace lua_tasks {

// Monotonic time runs timers (FOR, IMMEDIATE, elapsed); wall time is the
// target of UNTIL_TIME and UNTIL_NEXT, and may jump when the clock is set.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t MonoNs() const = 0;  // CLOCK_MONOTONIC, as uv_hrtime
  virtual int64_t WallNs() const = 0;  // nanoseconds since the Unix epoch
};

// The real clocks, and the CPU's time-stamp counter where it can stand in
// for CLOCK_MONOTONIC between real reads: on x86-64, when the CPU says the
// counter runs at a constant rate in every power state and the kernel itself
// keeps time by it (so it agrees across cores).
struct SystemTicks {
  SystemTicks();
  uint64_t Ticks() const {
#if defined(__x86_64__)
    return __rdtsc();
#else
    return 0;  // never read: usable is false
#endif
  }
  int64_t Ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  bool usable;
};

class SystemClock final : public Clock {
 public:
  int64_t MonoNs() const override { return mono_.Now(); }
  int64_t WallNs() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

 private:
  mutable TickClock<SystemTicks> mono_;  // one runtime's, read on its own thread only
};

// A clock whose wall time is a base clock's plus an offset; monotonic time is
// the base's. A fleet member sets the offset to its measured difference to
// PostgreSQL's clock, so a deadline one member records is checked by another
// against the same time (docs/fleet.md#one-clock). The base is a member, not
// a pointer: its reads stay direct calls on the hot path.
template <class Base>
class OffsetClock final : public Clock {
 public:
  template <class... Args>
  explicit OffsetClock(Args&&... args) : base(std::forward<Args>(args)...) {}
  int64_t MonoNs() const override { return base.MonoNs(); }
  int64_t WallNs() const override { return base.WallNs() + offset_ns_; }
  int64_t offset_ns() const { return offset_ns_; }
  void set_offset_ns(int64_t ns) { offset_ns_ = ns; }

  Base base;

 private:
  int64_t offset_ns_ = 0;  // set and read on the runtime's own thread
};

}  // namespace lua_tasks
