// SPDX-License-Identifier: MIT
#include "core/base/clock.hpp"

#include <cstdio>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace lua_tasks {

namespace {

// CPUID 0x80000007, EDX bit 8: the counter runs at a constant rate in every
// P-, C- and T-state.
bool InvariantTsc() {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (__get_cpuid_max(0x80000000, nullptr) < 0x80000007) return false;
  if (!__get_cpuid(0x80000007, &a, &b, &c, &d)) return false;
  return (d & (1u << 8)) != 0;
#else
  return false;
#endif
}

// The kernel keeps CLOCK_MONOTONIC by the counter only once it has found it
// in step on every core; if it later finds otherwise, it switches away, and
// TickClock's checks against real reads notice.
bool KernelKeepsTimeByTsc() {
  std::FILE* f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  if (f == nullptr) return false;
  char name[32] = {};
  const bool read = std::fgets(name, sizeof name, f) != nullptr;
  std::fclose(f);
  return read && std::strcmp(name, "tsc\n") == 0;
}

}  // namespace

SystemTicks::SystemTicks() : usable(InvariantTsc() && KernelKeepsTimeByTsc()) {}

}  // namespace lua_tasks
