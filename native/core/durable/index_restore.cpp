// SPDX-License-Identifier: MIT
#include "core/durable/index_restore.hpp"

#include <algorithm>

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

void IndexReader::Inbox(std::string_view key, std::string_view value) {
  restore_->Add(kInboxSpace, key, value);
  mailed_.emplace(TaskOf(key));
}

void IndexReader::Entry(std::string_view id, std::string_view value) {
  if (id == kIndexMarkKey || (!own_prefix_.empty() && id.substr(0, own_prefix_.size()) == own_prefix_)) return;
  RecordKind kind;
  std::string_view payload;
  IndexEntry entry;
  const bool reads = OpenRecordView(value, &kind, &payload);
  if (reads && kind == RecordKind::kEnd) {  // finished, retained: its end record
    restore_->Add(kJournalSpace, RecordKey(id, 0), value);
    return;
  }
  if (reads && kind == RecordKind::kIndex && DecodeIndexEntry(payload, &entry) &&
      StaysDormant(entry, wall_now_, !mailed_.empty() && mailed_.count(std::string(id)) > 0)) {
    if (entry.key) out_.keys.emplace_back(id, *entry.key);
    dormant_->Add(id, DormantTasks::Entry{entry.wait.kind, entry.wait.wall_deadline});
    ++out_.dormant;
    return;
  }
  now_.emplace_back(id);  // runs now (or its entry is damaged: its journal says what it is)
  if (!reads) {
    damaged_.emplace_back(id, "does not read (its checksum or its form is wrong)");
  } else if (kind != RecordKind::kIndex) {
    damaged_.emplace_back(id, std::string("is a ") + RecordKindKey(kind) + " record, not an index entry");
  } else if (!DecodeIndexEntry(payload, &entry)) {
    damaged_.emplace_back(id, "does not decode");
  }
}

IndexRestore IndexReader::Finish() {
  dormant_->Seal();
  out_.complete = true;
  for (std::string& id : now_) {
    if (restore_->First(id) != nullptr) continue;
    auto bad = std::find_if(damaged_.begin(), damaged_.end(), [&](const auto& d) { return d.first == id; });
    // A finished task's end record (its status, result and idempotency key)
    // lives only in its entry: what a damaged one held is lost with it.
    std::string why = bad == damaged_.end()
                          ? "its index entry names a journal the store does not hold"
                          : "its index entry " + bad->second +
                                " and the store holds no journal for it: it was a finished task's end record, or a "
                                "task whose journal is gone; what it held (a result, an idempotency key) is lost";
    out_.missing.push_back({std::move(id), std::move(why)});
  }
  now_.clear();
  return std::move(out_);
}

IndexRestore RestoreFromIndex(StoreDb& db, std::string_view name, std::string_view own_prefix, int64_t wall_now,
                              JournalRestore* restore, DormantTasks* dormant) {
  // The mark first: without it nothing is read (the caller reads every journal).
  if (!db.Get(name, kIndexSpace, kIndexMarkKey).has_value()) return IndexRestore{};
  IndexReader reader(own_prefix, wall_now, restore, dormant);
  // Every inbox: the messages of the tasks that run now, and which tasks have any.
  db.Scan(name, kInboxSpace, kInboxSpace,
          [&](int, std::string_view key, std::string_view value) { reader.Inbox(key, value); });
  // Then each entry, in one pass and without a copy of it: a dormant task
  // is filed at once, the others' journals are read after the pass.
  db.Scan(name, kIndexSpace, kIndexSpace,
          [&](int, std::string_view id, std::string_view value) { reader.Entry(id, value); });
  for (const std::string& id : reader.now()) RestoreTask(db, name, id, false, restore);
  return reader.Finish();
}

void RestoreTask(StoreDb& db, std::string_view name, std::string_view id, bool inbox, JournalRestore* restore) {
  const auto [low, high] = TaskRange(id);
  db.ScanRange(name, kJournalSpace, inbox ? kInboxSpace : kJournalSpace, low, high,
               [restore](int space, std::string_view key, std::string_view value) { restore->Add(space, key, value); });
}

}  // namespace lua_tasks
