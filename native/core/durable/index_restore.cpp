// SPDX-License-Identifier: MIT
#include "core/durable/index_restore.hpp"

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
                              bool lazy, JournalRestore* restore, DormantTasks* dormant) {
  IndexRestore out;
  struct Indexed {
    std::string id;
    std::string record;
  };
  std::vector<Indexed> entries;
  db.Scan(name, kIndexSpace, kIndexSpace, [&](int, std::string_view key, std::string_view value) {
    if (key == kIndexMarkKey) {
      out.complete = true;
      return;
    }
    if (!own_prefix.empty() && key.substr(0, own_prefix.size()) == own_prefix) return;
    entries.push_back({std::string(key), std::string(value)});
  });
  if (!out.complete) return out;
  // Every inbox: the messages of the tasks that run now, and which tasks have any.
  std::unordered_set<std::string> mailed;
  db.Scan(name, kInboxSpace, kInboxSpace, [&](int space, std::string_view key, std::string_view value) {
    restore->Add(space, key, value);
    const std::string_view id = TaskOf(key);
    mailed.emplace(id);
  });
  for (Indexed& e : entries) {
    std::string sealed = e.record;
    RecordKind kind;
    std::string_view payload;
    IndexEntry entry;
    const bool reads = OpenRecord(&sealed, &kind, &payload);
    if (reads && kind == RecordKind::kEnd) {  // finished, retained: its end record
      restore->Add(kJournalSpace, RecordKey(e.id, 0), e.record);
      continue;
    }
    if (lazy && reads && kind == RecordKind::kIndex && DecodeIndexEntry(payload, &entry) &&
        StaysDormant(entry, wall_now, mailed.count(e.id) > 0)) {
      if (entry.key) out.keys.emplace_back(e.id, *entry.key);
      dormant->Add(e.id, {entry.wait.kind, entry.wait.wall_deadline});
      ++out.dormant;
      continue;
    }
    // Runs now (or its entry is damaged: its journal says what it is).
    RestoreTask(db, name, e.id, false, restore);
    if (restore->First(e.id) == nullptr) out.missing.push_back(std::move(e.id));
  }
  return out;
}

void RestoreTask(StoreDb& db, std::string_view name, std::string_view id, bool inbox, JournalRestore* restore) {
  const auto [low, high] = TaskRange(id);
  db.ScanRange(name, kJournalSpace, inbox ? kInboxSpace : kJournalSpace, low, high,
               [restore](int space, std::string_view key, std::string_view value) { restore->Add(space, key, value); });
}

}  // namespace lua_tasks
