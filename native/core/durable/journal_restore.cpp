// SPDX-License-Identifier: MIT
#include "core/durable/journal_restore.hpp"

#include "core/durable/durable_record.hpp"

namespace lua_tasks {

namespace {

// The task id of a record key "<id>/<seq>": what comes before the last '/'.
std::string_view IdOf(std::string_view key) {
  const size_t slash = key.rfind('/');
  return slash == std::string_view::npos ? key : key.substr(0, slash);
}

}  // namespace

void JournalRestore::Add(int space, std::string_view key, std::string_view value) {
  if (space == kIndexSpace) {
    // A finished task's end record, where an indexed store keeps it: its
    // record 0. (Other index entries say nothing a journal does not.)
    if (!value.empty() && value[0] == static_cast<char>(RecordKind::kEnd) && key.find('/') == std::string_view::npos) {
      Add(kJournalSpace, RecordKey(key, 0), value);
    }
    return;
  }
  if (space != kJournalSpace && space != kInboxSpace) return;
  const std::string_view id = IdOf(key);
  if (last_ == nullptr || id != last_id_) {
    const auto it = groups_.find(id);
    last_ = it != groups_.end() ? &it->second : &groups_.try_emplace(std::string(id)).first->second;
    last_id_.assign(id);
  }
  ++records_;
  if (space == kJournalSpace) {
    if (last_->journal.empty()) ids_.emplace_back(id);  // listed at its first journal record
    last_->journal.emplace_back(value);
  } else {
    last_->inbox.keys.emplace_back(key);
    last_->inbox.records.emplace_back(value);
  }
}

JournalRestore::Group* JournalRestore::Find(std::string_view id) {
  const auto it = groups_.find(id);
  return it == groups_.end() ? nullptr : &it->second;
}

const std::string* JournalRestore::First(std::string_view id) const {
  const auto it = groups_.find(id);
  if (it == groups_.end() || it->second.journal.empty()) return nullptr;
  return &it->second.journal.front();
}

std::vector<std::string> JournalRestore::TakeJournal(std::string_view id) {
  Group* g = Find(id);
  return g == nullptr ? std::vector<std::string>() : std::move(g->journal);
}

JournalRestore::Inbox JournalRestore::TakeInbox(std::string_view id) {
  Group* g = Find(id);
  return g == nullptr ? Inbox() : std::move(g->inbox);
}

}  // namespace lua_tasks
