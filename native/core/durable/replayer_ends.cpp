// SPDX-License-Identifier: MIT
// Replayer: how a durable task's end is kept (its end record, the index) and what a join of it answers later.
//
// A durable parent joins its durable children across restarts
// (docs/durable.md#children): a child may end before the parent's join
// runs, or before the restart, and the join must still answer. This run's
// recent outcomes (RecentResults) keep every result but only the latest
// 1024 tasks; a durable task's end record (its status and first result,
// retained durableRetention) is kept here by key (the latest 100,000 within
// 64 MiB: KeptEnds), so a join answers from it after they are forgotten,
// and for a task that ended before this run.
#include "core/durable/replayer.hpp"
#include "core/scheduling/scheduler.hpp"

namespace lua_tasks {

void Replayer::OnEnd(Task* t, const TaskEnding& end) {
  auto it = journals_.find(t->key);
  if (it == journals_.end()) return;
  Journal* j = it->second.get();
  if (j->restart_ref != LUA_NOREF) {
    luaL_unref(s_.host()->main(), LUA_REGISTRYINDEX, j->restart_ref);
    j->restart_ref = LUA_NOREF;
  }
  // Closing: the task goes on at the next open. Diverged: its journal stays
  // for code that replays it (docs/durable.md#changing-code).
  // Replay-only: nothing is written.
  if (closing_ || j->diverged || replay_only_) return;
  if (!retain_ends_) {
    j->Finish(nullptr, indexed_, &writes_);
    Tell();
    return;
  }
  // The end record: status, key, when (wall ms), the result or the error's
  // message (nil if it cannot persist).
  LuaHost::HostSection section(s_.host(), s_.host()->current());
  lua_State* co = t->co;
  const int top = lua_gettop(co);
  EndRecord record;
  record.status = end.kind == TaskEnd::kDone ? "done" : end.kind == TaskEnd::kFailed ? "failed" : "cancelled";
  record.key = &j->key;
  record.label = &j->label;
  record.ended_ms = s_.clock()->WallNs() / 1000000;
  if (end.kind == TaskEnd::kDone && end.nres > 0) {
    record.result = top - end.nres + 1;
  } else if (end.kind == TaskEnd::kFailed && end.nres > 0) {
    record.result = top;
    record.error = true;
  }
  std::string payload;
  // No room: its journal stays, and a restart ends it again.
  if (!EncodeEndRecord(co, record, &payload, s_.persist_limits().Encoding(s_.host()))) return;
  j->Finish(&payload, indexed_, &writes_);
  Tell();
  ended_.Put(t->key, std::move(payload));  // for a join after its recent outcome is forgotten
}

void Replayer::KeepEnd(std::string_view id, std::string payload) {
  uint64_t key = 0;
  if (!s_.ParseId(id, &key)) {
    key = s_.next_key_++;
    foreign_ids_[key] = std::string(id);
    foreign_keys_[std::string(id)] = key;
  }
  ended_.Put(key, std::move(payload));
}

int Replayer::PushEnd(uint64_t key, lua_State* L) const {
  const std::string* end = ended_.Find(key);
  if (end == nullptr) return -1;
  // Stored as status, key, ended ms, result or error message (EncodeEndRecord).
  std::string error;
  const int top = lua_gettop(L);
  const int n = PushValues(L, *end, &error, Decoding(s_.host()));
  if (n < 4 || lua_type(L, top + 1) != LUA_TSTRING) {
    lua_settop(L, top);
    if (!lua_checkstack(L, 2)) return 0;
    lua_pushnil(L);
    lua_pushliteral(L, "the task's end record does not read");
    return 2;
  }
  const std::string_view status = lua_tostring(L, top + 1);
  lua_settop(L, top + 4);
  lua_pushboolean(L, status == "done");
  lua_replace(L, top + 1);
  if (status == "cancelled") {
    lua_pushliteral(L, "task cancelled");
    lua_replace(L, top + 4);
  } else if (status == "failed" && lua_isnil(L, top + 4)) {
    lua_pushliteral(L, "task failed (its error did not persist)");
    lua_replace(L, top + 4);
  }
  lua_remove(L, top + 3);
  lua_remove(L, top + 2);
  return 2;
}

void Replayer::Forget(std::string_view id) {
  if (uint64_t key = 0; s_.ParseId(id, &key)) ended_.Erase(key);
  // Its end record: record 0, or its index entry.
  writes_.push_back({kJournalSpace, RecordKey(id, 0), std::nullopt});
  if (indexed_) writes_.push_back({kIndexSpace, std::string(id), std::nullopt});
  Tell();
}

void Replayer::WriteIndex(const std::vector<std::pair<std::string, std::string>>& ended) {
  for (const auto& [id, record] : ended) {
    writes_.push_back({kIndexSpace, id, record});
    writes_.push_back({kJournalSpace, RecordKey(id, 0), std::nullopt});
  }
  for (const auto& [key, j] : journals_) {
    const Task* t = s_.tasks().Find(key);
    // A wait whose record is being written (flushing) is filed when it is.
    const bool waits = j->flushing || (t != nullptr && t->status == TaskStatus::kWaiting && IsDurablePoint(t->wait));
    j->Index(waits ? &j->held : nullptr, &writes_);
  }
  // Nothing to index (a new name): the mark goes with the first entry,
  // so a runtime without durable tasks writes no batch for it.
  if (journals_.empty() && ended.empty()) {
    mark_pending_ = true;
    return;
  }
  WriteIndexMark();
}

void Replayer::WriteIndexMark() {
  mark_pending_ = false;
  writes_.push_back({kIndexSpace, kIndexMarkKey, SealRecord(RecordKind::kIndex, mark_payload_)});
  Tell();
}

}  // namespace lua_tasks
