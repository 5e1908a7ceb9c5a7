// SPDX-License-Identifier: MIT
// Durable records: the one place a durable task's stored records are written and read (see durable_record.hpp).
#include "core/durable/durable_record.hpp"

#include <algorithm>
#include <cstring>

#include "core/base/crc32c.hpp"
#include "core/codec/state_codec.hpp"

namespace lua_tasks {

namespace {
// A call's or step's identity: this byte, its length (one byte), its bytes,
// then the values' payload. No values' payload starts with it (kScalars is
// 1, the codec's magic "L"), so a record without one reads as before.
constexpr char kIdentityTag = 2;
}  // namespace

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
    case RecordKind::kCommitFailed:
      return "a failed COMMIT";
    case RecordKind::kIndex:
      return "an index entry";
  }
  return "an unknown record";
}

const char* RecordKindKey(RecordKind kind) {
  switch (kind) {
    case RecordKind::kStart:
      return "start";
    case RecordKind::kYield:
      return "yield";
    case RecordKind::kIn:
      return "in";
    case RecordKind::kCall:
      return "call";
    case RecordKind::kStep:
      return "step";
    case RecordKind::kValue:
      return "value";
    case RecordKind::kMessage:
      return "message";
    case RecordKind::kEnd:
      return "end";
    case RecordKind::kPatch:
      return "patch";
    case RecordKind::kCommitFailed:
      return "commitFailed";
    case RecordKind::kIndex:
      return "index";
  }
  return "unknown";
}

std::string RecordKey(std::string_view id, size_t seq) {
  // Digits by hand, not snprintf: a durable wake makes a key for each of
  // its records, and snprintf's parsing was a third of the key's cost.
  char digits[20];
  size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + seq % 10);
    seq /= 10;
  } while (seq != 0);
  const size_t width = std::max<size_t>(n, 10);
  std::string key(id.size() + 1 + width, '0');
  std::memcpy(key.data(), id.data(), id.size());
  key[id.size()] = '/';
  for (size_t i = 0; i < n; ++i) key[key.size() - 1 - i] = digits[i];
  return key;
}

bool RecordSeq(std::string_view key, uint64_t* seq) {
  const size_t slash = key.rfind('/');
  if (slash == std::string_view::npos || slash + 1 >= key.size()) return false;
  uint64_t n = 0;
  for (const char c : key.substr(slash + 1)) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  *seq = n;
  return true;
}

bool OpenRecordView(std::string_view record, RecordKind* kind, std::string_view* payload) {
  if (record.size() < 6) return false;  // a kind, and the CRC
  const size_t body = record.size() - 4;
  uint32_t stored = 0;
  for (int i = 0; i < 4; ++i) stored |= static_cast<uint32_t>(static_cast<uint8_t>(record[body + i])) << (8 * i);
  if (Crc32c::Update(0, record.substr(0, body)) != stored) return false;
  *kind = static_cast<RecordKind>(record[0]);
  *payload = record.substr(1, body - 1);
  return true;
}

bool OpenRecord(std::string* record, RecordKind* kind, std::string_view* payload) {
  if (!UnsealRecord(record) || record->empty()) return false;
  *kind = static_cast<RecordKind>((*record)[0]);
  *payload = std::string_view(*record).substr(1);
  return true;
}

namespace {
// An identity as a payload starts with it: its tag, length and bytes (at
// most kMaxIdentity: longer ones are cut).
void PutIdentity(std::string* out, std::string_view id) {
  id = id.substr(0, kMaxIdentity);
  out->push_back(kIdentityTag);
  out->push_back(static_cast<char>(id.size()));
  out->append(id);
}
}  // namespace

std::string SealRecord(RecordKind kind, std::string_view payload, std::optional<std::string_view> identity) {
  std::string bytes;
  const std::string_view id = identity ? identity->substr(0, kMaxIdentity) : std::string_view();
  bytes.reserve(payload.size() + 5 + (identity ? id.size() + 2 : 0));
  bytes.push_back(static_cast<char>(kind));
  if (identity) PutIdentity(&bytes, id);
  bytes.append(payload);
  const uint32_t crc = Crc32c::Update(0, bytes);
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>(crc >> (8 * i)));
  return bytes;
}

bool UnsealRecord(std::string* record) {
  if (record->size() < 5) return false;
  const size_t body = record->size() - 4;
  uint32_t stored = 0;
  for (int i = 0; i < 4; ++i) stored |= static_cast<uint32_t>(static_cast<uint8_t>((*record)[body + i])) << (8 * i);
  if (Crc32c::Update(0, std::string_view(*record).substr(0, body)) != stored) return false;
  record->resize(body);
  return true;
}

std::string_view SplitIdentity(std::string_view payload, std::optional<std::string_view>* identity) {
  identity->reset();
  if (payload.size() < 2 || payload[0] != kIdentityTag) return payload;
  const size_t n = static_cast<uint8_t>(payload[1]);
  if (payload.size() < 2 + n) return payload;  // does not read: the values' decoder says so
  *identity = payload.substr(2, n);
  return payload.substr(2 + n);
}

std::string DescribeIdentity(RecordKind kind, std::optional<std::string_view> identity) {
  std::string out = RecordKindName(kind);
  if (!identity) return out;
  if (kind == RecordKind::kCall) {
    if (identity->empty()) return out + " to an anonymous JS function";
    return out.append(" to ").append(*identity);
  }
  return out.append(" \"").append(*identity).append("\"");
}

std::string EncodeYield(const YieldRecord& y) {
  std::string out(2 + 3 * sizeof(int64_t), '\0');
  out[0] = static_cast<char>(y.kind);
  out[1] = static_cast<char>(y.unit);
  std::memcpy(&out[2], &y.value, 8);
  std::memcpy(&out[10], &y.wall_start, 8);
  std::memcpy(&out[18], &y.wall_deadline, 8);
  return out;
}

bool DecodeYield(std::string_view p, YieldRecord* y) {
  if (p.size() != 2 + 3 * sizeof(int64_t)) return false;
  y->kind = static_cast<WaitKind>(p[0]);
  y->unit = static_cast<Unit>(p[1]);
  std::memcpy(&y->value, &p[2], 8);
  std::memcpy(&y->wall_start, &p[10], 8);
  std::memcpy(&y->wall_deadline, &p[18], 8);
  return true;
}

std::string EncodeCommitFailed(uint64_t landed, std::string_view values) {
  std::string out(sizeof landed, '\0');
  std::memcpy(out.data(), &landed, sizeof landed);
  out.append(values);
  return out;
}

bool DecodeCommitFailed(std::string_view payload, uint64_t* landed, std::string_view* values) {
  if (payload.size() < sizeof *landed) return false;
  std::memcpy(landed, payload.data(), sizeof *landed);
  *values = payload.substr(sizeof *landed);
  return true;
}

namespace {
constexpr size_t kYieldBytes = 2 + 3 * sizeof(int64_t);
}  // namespace

std::string SealIndexEntry(const IndexEntry& e) {
  // State ('R' running, 'W' waiting), whether a key follows, the wait's
  // yield payload when waiting, then the key's bytes.
  std::string p;
  p.reserve(2 + kYieldBytes + (e.key ? e.key->size() : 0));
  p.push_back(e.waiting ? 'W' : 'R');
  p.push_back(e.key ? 1 : 0);
  if (e.waiting) p.append(EncodeYield(e.wait));
  if (e.key) p.append(*e.key);
  return SealRecord(RecordKind::kIndex, p);
}

bool DecodeIndexEntry(std::string_view p, IndexEntry* e) {
  if (p.size() < 2 || (p[0] != 'R' && p[0] != 'W') || (p[1] != 0 && p[1] != 1)) return false;
  e->waiting = p[0] == 'W';
  const bool keyed = p[1] == 1;
  p.remove_prefix(2);
  if (e->waiting) {
    if (p.size() < kYieldBytes || !DecodeYield(p.substr(0, kYieldBytes), &e->wait)) return false;
    p.remove_prefix(kYieldBytes);
  }
  if (keyed)
    e->key = std::string(p);
  else if (!p.empty())
    return false;
  else
    e->key.reset();
  return true;
}

std::string DescribeRecord(RecordKind kind, std::string_view payload) {
  if (kind == RecordKind::kYield) {
    YieldRecord y;
    if (DecodeYield(payload, &y)) {
      return std::string("a yield (") + WaitKindName(y.kind) + ")";
    }
  }
  if (kind == RecordKind::kCall || kind == RecordKind::kStep) {
    std::optional<std::string_view> identity;
    SplitIdentity(payload, &identity);
    return DescribeIdentity(kind, identity);
  }
  return RecordKindName(kind);
}

namespace {

// Most records hold only scalars (a wake's "SCHEDULER", elapsed, unit; a JS
// call's number or string; a clock read): those skip the snapshot codec,
// whose per-call setup (a Lua thread, a table index) cost more than the
// values. The payload then starts with kScalars (the codec's start with "L").
constexpr char kScalars = 1;
enum : char { kNil, kFalse, kTrue, kInteger, kFloat, kString };

// Strings past this many bytes in all take the codec, which writes a
// repeated string once (return s, s, s ... of one big string).
constexpr size_t kMaxScalarStringBytes = 4096;

bool AllScalars(lua_State* L, int first, int n) {
  size_t strings = 0;
  for (int i = 0; i < n; ++i) {
    const int t = lua_type(L, first + i);
    if (t == LUA_TSTRING) {
      strings += lua_rawlen(L, first + i);
      if (strings > kMaxScalarStringBytes) return false;
    } else if (t != LUA_TNIL && t != LUA_TBOOLEAN && t != LUA_TNUMBER) {
      return false;
    }
  }
  return true;
}

template <typename T>
void Put(std::string* out, T v) {
  char b[sizeof v];
  std::memcpy(b, &v, sizeof v);
  out->append(b, sizeof v);
}

template <typename T>
bool Get(std::string_view* in, T* v) {
  if (in->size() < sizeof *v) return false;
  std::memcpy(v, in->data(), sizeof *v);
  in->remove_prefix(sizeof *v);
  return true;
}

void EncodeScalars(lua_State* L, int first, int n, std::string* out) {
  out->clear();
  out->push_back(kScalars);
  Put(out, static_cast<uint32_t>(n));
  for (int i = first; i < first + n; ++i) {
    switch (lua_type(L, i)) {
      case LUA_TNIL:
        out->push_back(kNil);
        break;
      case LUA_TBOOLEAN:
        out->push_back(lua_toboolean(L, i) ? kTrue : kFalse);
        break;
      case LUA_TNUMBER:
        if (lua_isinteger(L, i)) {
          out->push_back(kInteger);
          Put(out, static_cast<int64_t>(lua_tointeger(L, i)));
        } else {
          out->push_back(kFloat);
          Put(out, static_cast<double>(lua_tonumber(L, i)));
        }
        break;
      default: {
        size_t len;
        const char* s = lua_tolstring(L, i, &len);
        out->push_back(kString);
        Put(out, static_cast<uint32_t>(len));
        out->append(s, len);
      }
    }
  }
}

int PushScalars(lua_State* L, std::string_view in, std::string* error) {
  in.remove_prefix(1);
  uint32_t n = 0;
  if (!Get(&in, &n) || n > in.size() || !lua_checkstack(L, static_cast<int>(n) + 1)) {
    *error = "a journal record that does not read (its count)";
    return -1;
  }
  for (uint32_t i = 0; i < n; ++i) {
    char tag = 0;
    int64_t integer;
    double number;
    uint32_t len;
    bool ok = Get(&in, &tag);
    if (ok && tag == kNil) {
      lua_pushnil(L);
    } else if (ok && (tag == kFalse || tag == kTrue)) {
      lua_pushboolean(L, tag == kTrue);
    } else if (ok && tag == kInteger && Get(&in, &integer)) {
      lua_pushinteger(L, integer);
    } else if (ok && tag == kFloat && Get(&in, &number)) {
      lua_pushnumber(L, number);
    } else if (ok && tag == kString && Get(&in, &len) && len <= in.size()) {
      lua_pushlstring(L, in.data(), len);
      in.remove_prefix(len);
    } else {
      lua_pop(L, static_cast<int>(i));
      *error = "a journal record that does not read (value " + std::to_string(i + 1) + ")";
      return -1;
    }
  }
  if (!in.empty()) {
    lua_pop(L, static_cast<int>(n));
    *error = "a journal record with bytes after its values";
    return -1;
  }
  return static_cast<int>(n);
}

}  // namespace

bool EncodeValues(lua_State* L, int n, std::string* out, std::string* error, const CodecGuard& guard,
                  CodecFailure* failure) {
  const int first = lua_gettop(L) - n + 1;
  if (AllScalars(L, first, n)) {
    EncodeScalars(L, first, n, out);
    if (out->size() <= guard.max_bytes) {
      if (failure != nullptr) *failure = CodecFailure::kNone;
      return true;
    }
    out->clear();
    *error = "value: encodes to more than " + std::to_string(guard.max_bytes) + " bytes";
    if (failure != nullptr) *failure = CodecFailure::kTooLarge;
    return false;
  }
  lua_createtable(L, n, 1);
  for (int i = 0; i < n; ++i) {
    lua_pushvalue(L, first + i);
    lua_rawseti(L, -2, i + 1);
  }
  lua_pushinteger(L, n);
  lua_setfield(L, -2, "n");
  const bool ok = EncodeState(L, -1, out, error, "value", guard, failure);
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

int PushValues(lua_State* L, std::string_view payload, std::string* error, const CodecGuard& guard) {
  if (!payload.empty() && payload[0] == kScalars) return PushScalars(L, payload, error);
  if (!DecodeState(L, payload, error, nullptr, guard)) return -1;
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

bool EncodeStartRecord(lua_State* L, std::string_view entry, const std::optional<std::string>& key, int first,
                       int nargs, std::string* out, std::string* error, const CodecGuard& guard,
                       CodecFailure* failure) {
  first = lua_absindex(L, first);
  lua_pushlstring(L, entry.data(), entry.size());
  if (key) {
    lua_pushlstring(L, key->data(), key->size());
  } else {
    lua_pushnil(L);
  }
  for (int i = 0; i < nargs; ++i) lua_pushvalue(L, first + i);
  const bool ok = EncodeValues(L, nargs + 2, out, error, guard, failure);
  lua_pop(L, nargs + 2);
  return ok;
}

void LabelStartRecord(std::string* payload, std::string_view label) {
  std::string labelled;
  labelled.reserve(payload->size() + 2 + std::min(label.size(), kMaxIdentity));
  PutIdentity(&labelled, label);
  labelled.append(*payload);
  *payload = std::move(labelled);
}

int PushStartRecord(lua_State* L, std::string_view payload, std::string* entry, std::optional<std::string>* key,
                    std::string* error, std::optional<std::string>* label) {
  std::optional<std::string_view> identity;
  payload = SplitIdentity(payload, &identity);
  if (label != nullptr) {
    if (identity) {
      *label = std::string(*identity);
    } else {
      label->reset();
    }
  }
  const int count = PushValues(L, payload, error);
  if (count < 2) {
    if (count > 0) lua_pop(L, count);
    return -1;
  }
  if (lua_type(L, -count + 1) == LUA_TSTRING) {
    *key = lua_tostring(L, -count + 1);
  } else {
    key->reset();
  }
  *entry = lua_type(L, -count) == LUA_TSTRING ? lua_tostring(L, -count) : "";
  lua_rotate(L, -count, -2);  // entry, key to the top
  lua_pop(L, 2);
  return count - 2;
}

bool EncodeEndRecord(lua_State* L, const EndRecord& end, std::string* out, const CodecGuard& guard) {
  const int top = lua_gettop(L);
  if (!lua_checkstack(L, 7)) return false;
  lua_pushstring(L, end.status);
  if (end.key != nullptr && *end.key) {
    lua_pushlstring(L, (*end.key)->data(), (*end.key)->size());
  } else {
    lua_pushnil(L);
  }
  lua_pushnumber(L, static_cast<double>(end.ended_ms));
  if (end.result == 0) {
    lua_pushnil(L);
  } else if (end.error) {
    PushErrorMessage(L, end.result);
  } else {
    lua_pushvalue(L, end.result);
  }
  const bool labelled = end.label != nullptr && *end.label;
  if (labelled) lua_pushlstring(L, (*end.label)->data(), (*end.label)->size());
  const int n = labelled ? 5 : 4;
  std::string error;
  if (!EncodeValues(L, n, out, &error, guard)) {
    lua_settop(L, top + 3);
    lua_pushnil(L);  // a result that cannot persist, or past maxValueBytes: kept as nil
    if (labelled) lua_pushlstring(L, (*end.label)->data(), (*end.label)->size());
    EncodeValues(L, n, out, &error);
  }
  lua_settop(L, top);
  return true;
}

int PushFirstRecord(lua_State* L, RecordKind kind, std::string_view payload, std::string* error) {
  if (kind != RecordKind::kStart && kind != RecordKind::kEnd) return 0;
  std::optional<std::string_view> label;
  if (kind == RecordKind::kStart) payload = SplitIdentity(payload, &label);
  const int n = PushValues(L, payload, error);
  const int first = lua_gettop(L) - n + 1;
  const int want = kind == RecordKind::kStart ? 2 : 4;
  if (n < want || lua_type(L, first) != LUA_TSTRING || !lua_checkstack(L, 2)) {
    if (n > 0) lua_pop(L, n);
    return -1;
  }
  if (kind == RecordKind::kStart) {
    lua_settop(L, first + 1);
    if (lua_type(L, first + 1) != LUA_TSTRING) {
      lua_pushnil(L);
      lua_replace(L, first + 1);
    }
    if (label) {
      lua_pushlstring(L, label->data(), label->size());
    } else {
      lua_pushnil(L);
    }
    return 3;
  }
  // An end record's label is its fifth value (none in one written before labels were kept).
  if (n < 5 || lua_type(L, first + 4) != LUA_TSTRING) {
    lua_settop(L, first + 3);
    lua_pushnil(L);
  } else {
    lua_settop(L, first + 4);
  }
  // Stored as status, key; given as key, status.
  lua_pushvalue(L, first + 1);
  lua_pushvalue(L, first);
  lua_replace(L, first + 1);
  lua_replace(L, first);
  return 5;
}

}  // namespace lua_tasks
