// SPDX-License-Identifier: MIT
// Runtime.open by the index: what a name's durable tasks need now, read; the rest left dormant.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
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

// The index read record by record, from any store: every inbox record
// first, then every index entry; then the journals of now() are read into
// the restore, and Finish says what was found. RestoreFromIndex is it over
// a StoreDb; lib/runtime feeds a store's pages to it.
class IndexReader {
 public:
  IndexReader(std::string_view own_prefix, int64_t wall_now, JournalRestore* restore, DormantTasks* dormant)
      : own_prefix_(own_prefix), wall_now_(wall_now), restore_(restore), dormant_(dormant) {}
  void Inbox(std::string_view key, std::string_view value);
  void Entry(std::string_view id, std::string_view value);
  // The tasks that run now, whose journals the caller reads into the restore.
  const std::vector<std::string>& now() const { return now_; }
  // Seals the dormant tasks; the tasks of now() with no journal go to `missing`.
  IndexRestore Finish();

 private:
  std::string own_prefix_;
  int64_t wall_now_;
  JournalRestore* restore_;
  DormantTasks* dormant_;
  std::unordered_set<std::string> mailed_;  // the tasks that have messages
  std::vector<std::string> now_;
  std::vector<std::pair<std::string, std::string>> damaged_;  // entries that run now as they are damaged: what each was
  IndexRestore out_;
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
