// SPDX-License-Identifier: MIT
// Clocks for the core tests: one moved by hand, one that moves on every read.
#pragma once

#include <cstdint>

#include "core/base/clock.hpp"

namespace lua_tasks {

// Stands still until Advance: exact scheduling without real time.
class FakeClock final : public Clock {
 public:
  int64_t MonoNs() const override { return mono; }
  int64_t WallNs() const override { return wall; }
  void Advance(int64_t ns) {
    mono += ns;
    wall += ns;
  }
  int64_t mono = 1'000'000'000;
  int64_t wall = int64_t{1'700'000'000} * 1'000'000'000;
};

// Each reading is 1 ms after the last, so any loop passes a CPU budget soon.
class TickingClock final : public Clock {
 public:
  int64_t MonoNs() const override { return mono += 1'000'000; }
  int64_t WallNs() const override { return int64_t{1'700'000'000} * 1'000'000'000 + mono; }
  mutable int64_t mono = 0;
};

}  // namespace lua_tasks
