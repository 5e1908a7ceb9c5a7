// SPDX-License-Identifier: MIT
// Clock: the scheduler's two time sources, injectable so tests can fake them.
#pragma once

#include <chrono>
#include <cstdint>

namespace lua_tasks {

// Monotonic time runs timers (FOR, IMMEDIATE, elapsed); wall time is the
// target of UNTIL_TIME and UNTIL_NEXT, and may jump when the clock is set.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t MonoNs() const = 0;  // CLOCK_MONOTONIC, as uv_hrtime
  virtual int64_t WallNs() const = 0;  // nanoseconds since the Unix epoch
};

class SystemClock final : public Clock {
 public:
  int64_t MonoNs() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  int64_t WallNs() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

}  // namespace lua_tasks
