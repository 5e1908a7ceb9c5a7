// SPDX-License-Identifier: MIT
// Replayer: journals attached to tasks, the records they append, the writes the store takes, the inbox.
#include "core/durable/replayer.hpp"

#include <algorithm>
#include <iterator>

#include "core/scheduling/scheduler.hpp"

namespace lua_tasks {

void Replayer::Attach(Task* t, DurableStart s) {
  std::string id = s.id.empty() ? s_.IdOf(t->key) : std::move(s.id);
  uint64_t parsed = 0;
  if (!s_.ParseId(id, &parsed) || parsed != t->key) {
    foreign_ids_[t->key] = id;
    foreign_keys_[id] = t->key;
  }
  auto j = std::make_unique<Journal>(std::move(id), std::move(s.records));
  j->key = std::move(s.key);
  j->label = std::move(s.label);
  if (j->size() == 0) {
    j->Append(RecordKind::kStart, s.start, &writes_);
    if (indexed_) j->Index(nullptr, &writes_);
    if (mark_pending_) WriteIndexMark();
    Tell();
  }
  j->entry = std::move(s.entry);
  t->durable = true;
  journals_[t->key] = std::move(j);
}

bool Replayer::ForeignKey(std::string_view id, uint64_t* key) const {
  if (foreign_keys_.empty()) return false;
  auto it = foreign_keys_.find(std::string(id));
  if (it == foreign_keys_.end()) return false;
  *key = it->second;
  return true;
}

bool Replayer::ReplaysWait(const Task* t, WaitKind kind) const {
  const Journal* j = JournalOf(t);
  if (j == nullptr || j->in_step > 0 || !j->replaying() || j->next_kind() != RecordKind::kYield) return false;
  YieldRecord y;
  return DecodeYield(j->Peek(), &y) && y.kind == kind;
}

bool Replayer::ReplaysMessage(const Task* t) const {
  const Journal* j = JournalOf(t);
  return j != nullptr && j->in_step == 0 && j->replaying() && j->next_kind() == RecordKind::kMessage;
}

// ---- Writes ----

std::vector<StoreWrite> Replayer::TakeWrites() {
  told_ = false;
  std::vector<StoreWrite> out;
  out.swap(writes_);
  return out;
}

void Replayer::PutBackWrites(std::vector<StoreWrite> writes) {
  writes.insert(writes.end(), std::make_move_iterator(writes_.begin()), std::make_move_iterator(writes_.end()));
  writes_ = std::move(writes);
  Tell();
}

void Replayer::Tell() {
  // A replay-only runtime writes nothing (it has no store to write to).
  if (told_ || writes_.empty() || replay_only_) return;
  told_ = true;
  s_.hooks_->OnJournal();
}

void Replayer::AppendRecord(Journal* j, RecordKind kind, std::string_view payload,
                            std::optional<std::string_view> identity) {
  j->Append(kind, payload, &writes_, identity);
  Tell();
}

namespace {

// `size`: the record's size as known ("300 bytes", "more than 300 bytes").
std::string JournalFull(const Journal& j, const std::string& size, size_t limit) {
  return "a record of " + size + " would take its journal past " + std::to_string(limit) + " bytes (it holds " +
         std::to_string(j.bytes()) + "); " + LimitAdvice("maxJournalBytes", limit) +
         ", or end this run with tasks.continue_as_new(...) to start the task again with an empty journal";
}

}  // namespace

bool Replayer::RecordFits(Journal* j, size_t bytes, std::string* error) const {
  const PersistLimits& limits = s_.persist_limits();
  if (bytes > limits.value_bytes) {
    *error = "a record of " + std::to_string(bytes) + " bytes; " + LimitAdvice("maxValueBytes", limits.value_bytes);
    return false;
  }
  const size_t cost = bytes + Journal::kRecordOverhead;
  if (cost > limits.journal_bytes || j->bytes() > limits.journal_bytes - cost) {
    *error = JournalFull(*j, std::to_string(bytes) + " bytes", limits.journal_bytes);
    return false;
  }
  return true;
}

bool Replayer::EncodeRecord(Journal* j, lua_State* L, int n, std::string* payload, std::string* error, bool* limit) {
  const PersistLimits& limits = s_.persist_limits();
  const size_t used = j->bytes() + Journal::kRecordOverhead;
  const size_t room = used < limits.journal_bytes ? limits.journal_bytes - used : 0;
  CodecFailure failure;
  const bool ok = EncodeValues(L, n, payload, error, limits.Encoding(s_.host(), room), &failure);
  if (limit != nullptr) *limit = failure == CodecFailure::kTooLarge;
  if (failure == CodecFailure::kTooLarge) {
    *error = room < limits.value_bytes
                 ? JournalFull(*j, "more than " + std::to_string(room) + " bytes", limits.journal_bytes)
                 : *error + ": " + LimitAdvice("maxValueBytes", limits.value_bytes);
  }
  return ok;
}

const std::string& Replayer::Diverge(Journal* j, const char* now) {
  if (!j->diverged) {
    j->diverged = true;
    const size_t at = j->position();
    std::string recorded = "the journal's end";
    if (j->replaying()) recorded = DescribeRecord(j->next_kind(), j->Peek());
    j->divergence = "durable task " + j->id() + " diverged from its journal at record " + std::to_string(at) +
                    ": the journal holds " + recorded + ", the code now made " + now +
                    " (code changed under a running durable task: see docs/durable.md#changing-code)";
  }
  return j->divergence;
}

const std::string& Replayer::StopReplay(Journal* j, const char* now) {
  if (!j->stopped) {
    j->stopped = true;
    j->stop = "durable task " + j->id() + ": its replay reached the end of its journal (" + std::to_string(j->size()) +
              " records) and the code now made " + now + ": a replay-only runtime runs nothing live";
  }
  return j->stop;
}

// ---- The inbox: a durable task's messages are kept in the store (space 3)
// until received, so a restart puts them back in its mailbox ----

bool Replayer::OnSend(Task* t, lua_State* from, int nargs, std::string* restored, std::string* error) {
  Journal* j = JournalOf(t);
  if (restored != nullptr) {
    j->AddRestoredMessage(std::move(*restored));
    return true;
  }
  LuaHost::HostSection section(s_.host(), from);
  std::string payload;
  CodecFailure failure;
  const PersistLimits& limits = s_.persist_limits();
  if (!EncodeValues(from, nargs, &payload, error, limits.Encoding(s_.host()), &failure)) {
    if (failure == CodecFailure::kTooLarge) *error += ": " + LimitAdvice("maxValueBytes", limits.value_bytes);
    return false;
  }
  j->AddMessage(payload, &writes_);
  Tell();
  return true;
}

bool Replayer::ReplayMessage(Task* t, lua_State* L, int* n) {
  Journal* j = JournalOf(t);
  // Inside a step, the step's record holds what it took.
  if (j->in_step > 0 || !j->replaying()) return false;
  // The message it took then, or none (it waited): the mailbox of this run
  // is left for when the task goes on live.
  if (j->next_kind() != RecordKind::kMessage) {
    *n = -1;
    return true;
  }
  LuaHost::HostSection section(s_.host(), L);
  std::string error;
  const int got = PushValues(L, j->Next(), &error, Decoding(s_.host()));
  if (!j->replaying()) j->EndReplay();
  *n = got < 0 ? -3 : got;
  return true;
}

int Replayer::MessageTaken(Task* t, lua_State* L, int n) {
  Journal* j = JournalOf(t);
  if (j->MessageReceived(&writes_)) Tell();
  if (j->in_step > 0) return n;  // the step's record holds it
  LuaHost::HostSection section(s_.host(), L);
  std::string payload, error;
  if (!EncodeRecord(j, L, n, &payload, &error)) {
    lua_pop(L, n);
    return -3;
  }
  AppendRecord(j, RecordKind::kMessage, payload);
  return n;
}

bool Replayer::RestoreMessage(uint64_t key, std::string inbox_key, lua_State* from, int nargs) {
  Task* t = s_.Find(key);
  Journal* j = t == nullptr ? nullptr : JournalOf(t);
  if (j == nullptr) {
    lua_pop(from, nargs);
    return false;
  }
  // Later messages get later keys than the restored ones.
  uint64_t seq = 0;
  if (RecordSeq(inbox_key, &seq)) j->inbox_seq = std::max(j->inbox_seq, seq + 1);
  return s_.Post(key, from, nargs, &inbox_key) == Scheduler::SendResult::kQueued;
}

bool Replayer::RestoreInbox(uint64_t key, JournalRestore::Inbox inbox, lua_State* L, std::string* error) {
  for (size_t i = 0; i < inbox.keys.size(); ++i) {
    RecordKind kind;
    std::string_view payload;
    if (!OpenRecord(&inbox.records[i], &kind, &payload) || kind != RecordKind::kMessage) {
      *error = "The message " + inbox.keys[i] + " of a durable task's inbox is damaged.";
      return false;
    }
    const int top = lua_gettop(L);
    std::string why;
    const int n = PushValues(L, payload, &why);
    if (n < 0) {
      lua_settop(L, top);
      *error = "The message " + inbox.keys[i] + " does not read: " + why;
      return false;
    }
    RestoreMessage(key, std::move(inbox.keys[i]), L, n);
    lua_settop(L, top);
  }
  return true;
}

// ---- Dormant tasks ----

void Replayer::ActivateDue(int64_t batch_end) {
  if (!dormant_.HasWakes()) return;
  while (!s_.locked() && !s_.host()->terminating() && s_.clock()->MonoNs() < batch_end) {
    std::optional<std::string> id = dormant_.PopDue(s_.clock()->WallNs());
    if (!id) return;
    if (async_reads_) {
      Activating(*id);
    } else {
      s_.hooks_->OnActivate(*id);
    }
  }
}

bool Replayer::Activating(std::string_view id) {
  if (activations_.Find(id) != nullptr) return true;
  if (!async_reads_) return false;
  const DormantTasks::Entry* e = dormant_.Find(id);
  if (e == nullptr) return false;
  activations_.Begin(id, *e);
  dormant_.Take(id);
  s_.hooks_->OnActivate(std::string(id));  // starts the read; never runs Lua
  return true;
}

void Replayer::Activated(std::string_view id) {
  bool woke = false;
  for (uint64_t k : activations_.End(id)) {
    Task* w = s_.FindLive(k);
    if (w == nullptr || w->wait != WaitKind::kRestore) continue;  // cancelled, or ended, meanwhile
    s_.ClearWait(w);
    s_.Continue(w, 0);
    woke = true;
  }
  if (woke && s_.batch_ == 0) s_.hooks_->OnScheduleChange();
}

}  // namespace lua_tasks
