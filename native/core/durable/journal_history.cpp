// SPDX-License-Identifier: MIT
// Journal history: a durable task's stored records read one by one for a person (see journal_history.hpp).
#include "core/durable/journal_history.hpp"

#include "core/host/value_summary.hpp"

namespace lua_tasks {

namespace {

// Decodes a values payload and summarises what it holds; false with r->error.
bool Values(lua_State* L, std::string_view payload, const CodecGuard& guard, HistoryRecord* r) {
  const int top = lua_gettop(L);
  std::string error;
  const int n = PushValues(L, payload, &error, guard);
  if (n < 0) {
    r->error = "its values do not read: " + error;
    lua_settop(L, top);
    return false;
  }
  r->values = SummarizeValues(L, top + 1, n);
  lua_settop(L, top);
  return true;
}

bool ReadStart(lua_State* L, std::string_view payload, HistoryRecord* r) {
  const int top = lua_gettop(L);
  std::string error, entry;
  std::optional<std::string> key;
  const int n = PushStartRecord(L, payload, &entry, &key, &error, &r->label);
  if (n < 0) {
    r->error = "the start record does not read" + (error.empty() ? std::string() : ": " + error);
    lua_settop(L, top);
    return false;
  }
  r->name = std::move(entry);
  r->key = std::move(key);
  r->values = SummarizeValues(L, top + 1, n);
  lua_settop(L, top);
  return true;
}

bool ReadEnd(lua_State* L, std::string_view payload, HistoryRecord* r) {
  const int top = lua_gettop(L);
  std::string error;
  const int n = PushFirstRecord(L, RecordKind::kEnd, payload, &error);  // key, status, ended, result, label
  if (n != 5) {
    r->error = "the end record does not read" + (error.empty() ? std::string() : ": " + error);
    lua_settop(L, top);
    return false;
  }
  if (lua_type(L, top + 1) == LUA_TSTRING) r->key = lua_tostring(L, top + 1);
  if (lua_type(L, top + 2) == LUA_TSTRING) r->status = lua_tostring(L, top + 2);
  r->ended_ms = static_cast<int64_t>(lua_tonumber(L, top + 3));
  if (lua_type(L, top + 5) == LUA_TSTRING) r->label = lua_tostring(L, top + 5);
  r->values = SummarizeValues(L, top + 4, 1);
  lua_settop(L, top);
  return true;
}

bool ReadPayload(lua_State* L, std::string_view payload, const CodecGuard& guard, HistoryRecord* r) {
  switch (r->kind) {
    case RecordKind::kStart:
      return ReadStart(L, payload, r);
    case RecordKind::kEnd:
      return ReadEnd(L, payload, r);
    case RecordKind::kYield:
      r->has_yield = DecodeYield(payload, &r->yield);
      if (!r->has_yield) r->error = "the yield record does not read";
      return r->has_yield;
    case RecordKind::kPatch:
      r->name = std::string(payload);
      return true;
    case RecordKind::kCommitFailed: {
      std::string_view values;
      if (!DecodeCommitFailed(payload, &r->landed, &values)) {
        r->error = "the failed COMMIT's record does not read";
        return false;
      }
      return Values(L, values, guard, r);
    }
    case RecordKind::kCall:
    case RecordKind::kStep: {
      std::optional<std::string_view> identity;
      const std::string_view values = SplitIdentity(payload, &identity);
      if (identity) r->name = std::string(*identity);
      return Values(L, values, guard, r);
    }
    case RecordKind::kIndex: {  // an index entry (space 4): running, or waiting on its yield
      IndexEntry e;
      if (!DecodeIndexEntry(payload, &e)) {
        r->error = "the index entry does not read";
        return false;
      }
      r->status = e.waiting ? "waiting" : "running";
      r->has_yield = e.waiting;
      r->yield = e.wait;
      r->key = std::move(e.key);
      return true;
    }
    case RecordKind::kIn:
    case RecordKind::kValue:
    case RecordKind::kMessage:
      return Values(L, payload, guard, r);
  }
  r->error = "a record of an unknown kind";
  return false;
}

}  // namespace

HistoryRecord ReadHistoryRecord(lua_State* L, std::string_view key, std::string record, const CodecGuard& guard) {
  HistoryRecord r;
  RecordSeq(key, &r.seq);
  std::string_view payload;
  if (!OpenRecord(&record, &r.kind, &payload)) {
    r.error = "the record is damaged (its checksum does not match)";
    return r;
  }
  r.what = DescribeRecord(r.kind, payload);
  r.ok = ReadPayload(L, payload, guard, &r);
  return r;
}

}  // namespace lua_tasks
