// SPDX-License-Identifier: MIT
#include "core/durable/index_restore.hpp"

#include <algorithm>
#include <unordered_set>

namespace lua_tasks {

bool StaysDormant(const IndexEntry& e, int64_t wall_now, bool has_messages) {
  if (!e.waiting || has_messages) return false;
  switch (e.wait.kind) {
    case WaitKind::kIndefinitely:
      return true;
    case WaitKind::kReceive:
    case WaitKind::kFor:
    case WaitKind::kUntilTime:
    case WaitKind::kUntilNext:
      // A receive without a timeout has no deadline; the others have one.
      if (e.wait.wall_deadline == 0) return e.wait.kind == WaitKind::kReceive;
      return e.wait.wall_deadline - DormantTasks::kLeadNs > wall_now;
    default:
      return false;
  }
}

namespace {

// The keys of one task's records, "<id>/" to "<id>0" ('0' follows '/').
std::pair<std::string, std::string> TaskRange(std::string_view id) {
  std::string low(id), high(id);
  low.push_back('/');
  high.push_back('0');
  return {std::move(low), std::move(high)};
}

std::string_view TaskOf(std::string_view inbox_key) {
  const size_t slash = inbox_key.rfind('/');
  return slash == std::string_view::npos ? inbox_key : inbox_key.substr(0, slash);
}

}  // namespace

IndexRestore RestoreFromIndex(StoreDb& db, std::string_view name, std::string_view own_prefix, int64_t wall_now,
                              JournalRestore* restore, DormantTasks* dormant) {
  IndexRestore out;
  // The mark first: without it nothing is read (the caller reads every journal).
  out.complete = db.Get(name, kIndexSpace, kIndexMarkKey).has_value();
  if (!out.complete) return out;
  // Every inbox: the messages of the tasks that run now, and which tasks have any.
  std::unordered_set<std::string> mailed;
  db.Scan(name, kInboxSpace, kInboxSpace, [&](int space, std::string_view key, std::string_view value) {
    restore->Add(space, key, value);
    mailed.emplace(TaskOf(key));
  });
  // Then each entry, in one pass and without a copy of it: a dormant task
  // is filed at once, the others' journals are read after the pass.
  std::vector<std::string> now;
  // The entries among them that are damaged: what each was instead.
  std::vector<std::pair<std::string, std::string>> damaged;
  db.Scan(name, kIndexSpace, kIndexSpace, [&](int, std::string_view id, std::string_view value) {
    if (id == kIndexMarkKey || (!own_prefix.empty() && id.substr(0, own_prefix.size()) == own_prefix)) return;
    RecordKind kind;
    std::string_view payload;
    IndexEntry entry;
    const bool reads = OpenRecordView(value, &kind, &payload);
    if (reads && kind == RecordKind::kEnd) {  // finished, retained: its end record
      restore->Add(kJournalSpace, RecordKey(id, 0), value);
      return;
    }
    if (reads && kind == RecordKind::kIndex && DecodeIndexEntry(payload, &entry) &&
        StaysDormant(entry, wall_now, !mailed.empty() && mailed.count(std::string(id)) > 0)) {
      if (entry.key) out.keys.emplace_back(id, *entry.key);
      dormant->Add(id, DormantTasks::Entry{entry.wait.kind, entry.wait.wall_deadline});
      ++out.dormant;
      return;
    }
    now.emplace_back(id);  // runs now (or its entry is damaged: its journal says what it is)
    if (!reads) {
      damaged.emplace_back(id, "does not read (its checksum or its form is wrong)");
    } else if (kind != RecordKind::kIndex) {
      damaged.emplace_back(id, std::string("is a ") + RecordKindKey(kind) + " record, not an index entry");
    } else if (!DecodeIndexEntry(payload, &entry)) {
      damaged.emplace_back(id, "does not decode");
    }
  });
  dormant->Seal();
  for (std::string& id : now) {
    RestoreTask(db, name, id, false, restore);
    if (restore->First(id) != nullptr) continue;
    auto bad = std::find_if(damaged.begin(), damaged.end(), [&](const auto& d) { return d.first == id; });
    // A finished task's end record (its status, result and idempotency key)
    // lives only in its entry: what a damaged one held is lost with it.
    std::string why = bad == damaged.end()
                          ? "its index entry names a journal the store does not hold"
                          : "its index entry " + bad->second +
                                " and the store holds no journal for it: it was a finished task's end record, or a "
                                "task whose journal is gone; what it held (a result, an idempotency key) is lost";
    out.missing.push_back({std::move(id), std::move(why)});
  }
  return out;
}

void RestoreTask(StoreDb& db, std::string_view name, std::string_view id, bool inbox, JournalRestore* restore) {
  const auto [low, high] = TaskRange(id);
  db.ScanRange(name, kJournalSpace, inbox ? kInboxSpace : kJournalSpace, low, high,
               [restore](int space, std::string_view key, std::string_view value) { restore->Add(space, key, value); });
}

}  // namespace lua_tasks
