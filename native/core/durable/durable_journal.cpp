// SPDX-License-Identifier: MIT
// Journal: what entered one durable task from outside, in order (see durable_journal.hpp).
#include "core/durable/durable_journal.hpp"

#include <algorithm>

namespace lua_tasks {

Journal::Journal(std::string id, std::vector<std::string> replay)
    : id_(std::move(id)), replay_(std::move(replay)), cursor_(replay_.empty() ? 0 : 1), seq_(replay_.size()) {
  for (const std::string& r : replay_) bytes_ += r.size() + kRecordOverhead;
  if (cursor_ >= replay_.size()) EndReplay();
}

std::string_view Journal::Next() {
  landed_commits = 0;
  std::string_view r = replay_[cursor_++];
  return r.substr(1);
}

void Journal::EndReplay() {
  cursor_ = 0;
  replay_.clear();
  replay_.shrink_to_fit();
}

void Journal::Append(RecordKind kind, std::string_view payload, std::vector<StoreWrite>* out,
                     std::optional<std::string_view> identity) {
  landed_commits = 0;
  out->push_back({kJournalSpace, RecordKey(id_, seq_++), SealRecord(kind, payload, identity)});
  bytes_ += payload.size() + kRecordOverhead + (identity ? 2 + std::min(identity->size(), kMaxIdentity) : 0);
}

void Journal::Finish(const std::string* end, bool indexed, std::vector<StoreWrite>* out) const {
  const bool end_at_0 = end != nullptr && !indexed;
  for (size_t i = end_at_0 ? 1 : 0; i < seq_; ++i) out->push_back({kJournalSpace, RecordKey(id_, i), std::nullopt});
  if (end_at_0) out->push_back({kJournalSpace, RecordKey(id_, 0), SealRecord(RecordKind::kEnd, *end)});
  for (size_t i = 0; i < inbox.size(); ++i) out->push_back({kInboxSpace, inbox[i], std::nullopt});
  if (indexed) {
    PutIndex(end != nullptr ? std::optional<std::string>(SealRecord(RecordKind::kEnd, *end)) : std::nullopt, out);
  }
}

void Journal::Index(const YieldRecord* wait, std::vector<StoreWrite>* out) const {
  IndexEntry e;
  e.waiting = wait != nullptr;
  if (wait != nullptr) e.wait = *wait;
  e.key = key;
  PutIndex(SealIndexEntry(e), out);
}

void Journal::PutIndex(std::optional<std::string> value, std::vector<StoreWrite>* out) const {
  // The writes not taken yet go to the store in one batch: an entry of this
  // task among them is replaced, not written twice (a start and its first
  // wait, a wake and the end, land together).
  if (index_pos_ < out->size()) {
    StoreWrite& w = (*out)[index_pos_];
    if (w.space == kIndexSpace && w.key == id_) {
      w.value = std::move(value);
      return;
    }
  }
  index_pos_ = out->size();
  out->push_back({kIndexSpace, id_, std::move(value)});
}

void Journal::Restart(std::string_view start, std::vector<StoreWrite>* out) {
  for (size_t i = 1; i < seq_; ++i) out->push_back({kJournalSpace, RecordKey(id_, i), std::nullopt});
  out->push_back({kJournalSpace, RecordKey(id_, 0), SealRecord(RecordKind::kStart, start)});
  seq_ = 1;
  landed_commits = 0;
  bytes_ = start.size() + kRecordOverhead;
  EndReplay();
}

void Journal::AddMessage(std::string_view payload, std::vector<StoreWrite>* out) {
  std::string message_key = RecordKey(id_, inbox_seq++);
  out->push_back({kInboxSpace, message_key, SealRecord(RecordKind::kMessage, payload)});
  inbox.push_back(std::move(message_key));
}

bool Journal::MessageReceived(std::vector<StoreWrite>* out) {
  if (inbox.empty()) return false;
  out->push_back({kInboxSpace, std::move(inbox.front()), std::nullopt});
  inbox.pop_front();
  return true;
}

}  // namespace lua_tasks
