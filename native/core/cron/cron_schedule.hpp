// SPDX-License-Identifier: MIT
// Cron schedule: the next instant a cron expression matches, in an IANA time zone.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/cron/cron_expr.hpp"

namespace date {
class time_zone;
}

namespace lua_tasks {

// The zone named `name` (IANA, e.g. "Europe/Paris"), from date's process-wide
// tzdb over the system tzdata; nullptr plus a "cron: ..." message in *error if
// it is unknown. The pointer stays valid for the life of the process.
// Thread-safe.
const date::time_zone* FindZone(std::string_view name, std::string* error);

// The process's zone, the default of cron.next and UNTIL_NEXT (as Date's is
// for a Node user): $TZ, read now, if it names a zone, else the system's
// (/etc/localtime); nullptr (UTC) if neither can be read. Thread-safe.
const date::time_zone* ProcessZone();

// The next instant strictly after `from_epoch_seconds` at which `expr`
// matches, in epoch seconds. The zone is the expression's CRON_TZ prefix if it
// has one, else `zone` (nullptr = UTC). DST follows docs/design.md#cron (see
// CronExpr::interval). std::nullopt means "no next time": nothing matches in
// the expression's years or within 400 years of `from` (after which the
// Gregorian calendar repeats), or `from` is past the year 9999.
std::optional<int64_t> CronNext(const CronExpr& expr, int64_t from_epoch_seconds, const date::time_zone* zone);

// The zone's UTC offset at an instant, in seconds east of UTC (local = utc +
// offset); 0 for nullptr. Past the tzdata's last explicit transition (2037)
// this follows the zone's POSIX rule, as CronNext does.
int64_t ZoneOffset(const date::time_zone* zone, int64_t epoch_seconds);

// How a local civil time (seconds since 1970-01-01T00:00:00 local) maps to
// instants in `zone` (nullptr = UTC).
enum class LocalTimeKind : uint8_t {
  kNormal,       // exactly one instant
  kNonexistent,  // skipped by a forward transition (a spring-forward gap)
  kAmbiguous,    // occurs twice (a fall-back overlap)
};
LocalTimeKind ClassifyLocalTime(const date::time_zone* zone, int64_t local_seconds);

}  // namespace lua_tasks
