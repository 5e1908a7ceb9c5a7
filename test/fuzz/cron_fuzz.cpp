// SPDX-License-Identifier: MIT
// Fuzz target: ParseCron + CronNext on arbitrary text, instants and zones must never crash or
// stall.
#include <time.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "core/cron/cron_expr.hpp"
#include "core/cron/cron_schedule.hpp"

using lua_tasks::CronExpr;
using lua_tasks::CronNext;
using lua_tasks::FindZone;

namespace {

// Zones with unusual DST: 30-minute shifts (Lord_Howe), missing midnights
// (Sao_Paulo, Santiago), a skipped calendar day (Apia, 2011-12-30), a
// non-hour offset (Kathmandu).
const char* const kZones[] = {
    nullptr,        "America/New_York", "Europe/London", "America/Sao_Paulo", "America/Santiago", "Australia/Lord_Howe",
    "Pacific/Apia", "Asia/Kathmandu"};

int64_t CpuNanos() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

}  // namespace

// Input: 1 byte zone choice, 8 bytes `from` seed, then the expression text.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 9) return 0;
  const char* zone_name = kZones[data[0] % (sizeof kZones / sizeof kZones[0])];
  uint64_t seed;
  std::memcpy(&seed, data + 1, sizeof seed);
  const std::string_view text(reinterpret_cast<const char*>(data + 9), size - 9);

  // Zone lookups load files on first use; that is not the search's time.
  std::string error;
  const date::time_zone* zone = zone_name ? FindZone(zone_name, &error) : nullptr;
  (void)lua_tasks::ZoneOffset(zone, 0);  // also loads the zone's rule for after 2037
  // The work under test; returns false on a broken invariant.
  auto work = [&]() {
    CronExpr expr;
    if (!lua_tasks::ParseCron(text, &expr, &error))
      return error.rfind("cron: ", 0) == 0;  // every error names its component
    (void)lua_tasks::DescribeCron(expr);
    // A few instants: one from the input anywhere in int64, one near now and
    // around the DST years, and the 1970 epoch.
    const int64_t froms[] = {static_cast<int64_t>(seed), 1500000000 + static_cast<int64_t>(seed % 1000000000), 0};
    for (int64_t from : froms) {
      const std::optional<int64_t> next = CronNext(expr, from, zone);
      if (!next) continue;
      if (*next <= from) return false;  // strictly after
      // A schedule is a set of instants: from anywhere in [from, next) the
      // next one is the same.
      if (CronNext(expr, *next - 1, zone) != next) return false;
      // Following it goes forward.
      const std::optional<int64_t> after = CronNext(expr, *next, zone);
      if (after && *after <= *next) return false;
    }
    return true;
  };
  // Budget: 10 ms of CPU per input, sanitizers included. Thread CPU time, and
  // a slow input must be slow twice, so a busy machine or a sanitizer's
  // housekeeping does not make a fast input fail; a slow search is slow
  // every time.
  for (int attempt = 0;; ++attempt) {
    const int64_t started = CpuNanos();
    if (!work()) std::abort();
    const int64_t spent = CpuNanos() - started;
    if (spent <= 10000000) break;
    std::fprintf(stderr, "cron_fuzz: %.3f ms for '%.*s'\n", spent / 1e6, static_cast<int>(text.size()), text.data());
    if (attempt == 1) std::abort();
  }
  return 0;
}
