// SPDX-License-Identifier: MIT
// Runtime.open by the index: what a directory store's durable tasks need now, read; the rest left dormant.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/durable/dormant_tasks.hpp"
#include "core/durable/durable_record.hpp"
#include "core/durable/journal_restore.hpp"
#include "core/store/store_db.hpp"

namespace lua_tasks {

// Whether a task whose index entry is `e` can stay in the store at an open
// at `wall_now`: it waits on a deadline more than DormantTasks::kLeadNs
// away, INDEFINITELY, or in tasks.receive, and no message waits for it.
// Running tasks, joins, and waits that end soon or ended run now.
bool StaysDormant(const IndexEntry& e, int64_t wall_now, bool has_messages);

struct IndexRestore {
  bool complete = false;  // the name's index has its mark (else nothing was read)
  // The idempotency keys of the dormant tasks that have one: (id, key).
  std::vector<std::pair<std::string, std::string>> keys;
  size_t dormant = 0;
  // Tasks the index names that run now but whose journal is not in the
  // store (damage, or an edit by hand): reported, never silently dropped.
  struct Missing {
    std::string id;
    std::string why;  // what was wrong, for the report: "its index entry ..."
  };
  std::vector<Missing> missing;
};

// Reads `name`'s index (space 4) and inboxes (space 3): the tasks that run
// now get their journals and messages handed to *restore, finished ones
// their end records (as record 0), the others go to *dormant. Ids with
// `own_prefix` are tasks of this run (started before the restore) and are
// skipped. Throws StoreError; an entry that does not read runs now, its
// journal saying what the task is (or its absence going to `missing`).
IndexRestore RestoreFromIndex(StoreDb& db, std::string_view name, std::string_view own_prefix, int64_t wall_now,
                              JournalRestore* restore, DormantTasks* dormant);

// One task's journal, and its inbox if `inbox` (an activation's).
void RestoreTask(StoreDb& db, std::string_view name, std::string_view id, bool inbox, JournalRestore* restore);

}  // namespace lua_tasks
