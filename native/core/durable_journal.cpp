// SPDX-License-Identifier: MIT
// Journal: what entered one durable task from outside, in order (see durable_journal.hpp).
#include "durable_journal.hpp"

#include <cstdio>
#include <cstring>

#include "crc32c.hpp"
#include "state_codec.hpp"

namespace lua_tasks {

const char* RecordKindName(RecordKind kind) {
  switch (kind) {
    case RecordKind::kStart:
      return "the start";
    case RecordKind::kYield:
      return "a yield";
    case RecordKind::kIn:
      return "a wait's outcome";
    case RecordKind::kCall:
      return "a JS call";
    case RecordKind::kStep:
      return "tasks.step";
    case RecordKind::kValue:
      return "a clock or random read or a tasks call";
    case RecordKind::kMessage:
      return "a message received";
    case RecordKind::kEnd:
      return "the end";
    case RecordKind::kPatch:
      return "tasks.patched";
  }
  return "an unknown record";
}

Journal::Journal(std::string id, std::vector<std::string> replay)
    : id_(std::move(id)), replay_(std::move(replay)), cursor_(replay_.empty() ? 0 : 1), seq_(replay_.size()) {
  if (cursor_ >= replay_.size()) EndReplay();
}

std::string_view Journal::Next() {
  std::string_view r = replay_[cursor_++];
  return r.substr(1);
}

void Journal::EndReplay() {
  cursor_ = 0;
  replay_.clear();
  replay_.shrink_to_fit();
}

std::string Journal::KeyOf(std::string_view id, size_t seq) {
  char digits[16];
  std::snprintf(digits, sizeof digits, "%010zu", seq);
  std::string key;
  key.reserve(id.size() + 11);
  key.append(id).push_back('/');
  key.append(digits);
  return key;
}

std::string Journal::Seal(RecordKind kind, std::string_view payload) {
  std::string bytes;
  bytes.reserve(payload.size() + 5);
  bytes.push_back(static_cast<char>(kind));
  bytes.append(payload);
  const uint32_t crc = Crc32c::Update(0, bytes);
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>(crc >> (8 * i)));
  return bytes;
}

void Journal::Append(RecordKind kind, std::string_view payload, std::vector<SpacedWrite>* out) {
  out->push_back({kJournalSpace, KeyOf(id_, seq_++), Seal(kind, payload)});
}

void Journal::Finish(const std::string* end, std::vector<SpacedWrite>* out) const {
  for (size_t i = end != nullptr ? 1 : 0; i < seq_; ++i) out->push_back({kJournalSpace, KeyOf(id_, i), std::nullopt});
  if (end != nullptr) out->push_back({kJournalSpace, KeyOf(id_, 0), Seal(RecordKind::kEnd, *end)});
  for (const std::string& k : inbox) out->push_back({kInboxSpace, k, std::nullopt});
}

void Journal::Restart(std::string_view start, std::vector<SpacedWrite>* out) {
  for (size_t i = 1; i < seq_; ++i) out->push_back({kJournalSpace, KeyOf(id_, i), std::nullopt});
  out->push_back({kJournalSpace, KeyOf(id_, 0), Seal(RecordKind::kStart, start)});
  seq_ = 1;
  EndReplay();
}

bool Journal::Unseal(std::string* record) {
  if (record->size() < 5) return false;
  const size_t body = record->size() - 4;
  uint32_t stored = 0;
  for (int i = 0; i < 4; ++i) stored |= static_cast<uint32_t>(static_cast<uint8_t>((*record)[body + i])) << (8 * i);
  if (Crc32c::Update(0, std::string_view(*record).substr(0, body)) != stored) return false;
  record->resize(body);
  return true;
}

std::string Journal::EncodeYield(const YieldRecord& y) {
  std::string out(2 + 3 * sizeof(int64_t), '\0');
  out[0] = static_cast<char>(y.kind);
  out[1] = static_cast<char>(y.unit);
  std::memcpy(&out[2], &y.value, 8);
  std::memcpy(&out[10], &y.wall_start, 8);
  std::memcpy(&out[18], &y.wall_deadline, 8);
  return out;
}

bool Journal::DecodeYield(std::string_view p, YieldRecord* y) {
  if (p.size() != 2 + 3 * sizeof(int64_t)) return false;
  y->kind = static_cast<WaitKind>(p[0]);
  y->unit = static_cast<Unit>(p[1]);
  std::memcpy(&y->value, &p[2], 8);
  std::memcpy(&y->wall_start, &p[10], 8);
  std::memcpy(&y->wall_deadline, &p[18], 8);
  return true;
}

std::string Journal::Describe(RecordKind kind, std::string_view payload) {
  if (kind == RecordKind::kYield) {
    YieldRecord y;
    if (DecodeYield(payload, &y)) {
      return std::string("a yield (") + WaitKindName(y.kind) + ")";
    }
  }
  return RecordKindName(kind);
}

bool EncodeValues(lua_State* L, int n, std::string* out, std::string* error) {
  const int first = lua_gettop(L) - n + 1;
  lua_createtable(L, n, 1);
  for (int i = 0; i < n; ++i) {
    lua_pushvalue(L, first + i);
    lua_rawseti(L, -2, i + 1);
  }
  lua_pushinteger(L, n);
  lua_setfield(L, -2, "n");
  const bool ok = EncodeState(L, -1, out, error, "value");
  lua_pop(L, 1);
  return ok;
}

namespace {
int l_tostring(lua_State* L) {
  luaL_tolstring(L, 1, nullptr);
  return 1;
}
}  // namespace

void PushErrorMessage(lua_State* L, int idx) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) == LUA_TSTRING) {
    lua_pushvalue(L, idx);
    return;
  }
  lua_pushcfunction(L, l_tostring);
  lua_pushvalue(L, idx);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK || lua_type(L, -1) != LUA_TSTRING) {
    lua_pop(L, 1);
    lua_pushliteral(L, "an error value without a message");
  }
}

int PushValues(lua_State* L, std::string_view payload, std::string* error) {
  if (!DecodeState(L, payload, error)) return -1;
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    *error = "a journal record that is not a list of values";
    return -1;
  }
  lua_getfield(L, -1, "n");
  const auto n = static_cast<int>(lua_tointeger(L, -1));
  lua_pop(L, 1);
  if (n < 0 || !lua_checkstack(L, n + 1)) {
    lua_pop(L, 1);
    *error = "a journal record with more values than the stack takes";
    return -1;
  }
  const int table = lua_gettop(L);
  for (int i = 1; i <= n; ++i) lua_rawgeti(L, table, i);
  lua_remove(L, table);
  return n;
}

}  // namespace lua_tasks
