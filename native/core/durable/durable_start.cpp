// SPDX-License-Identifier: MIT
// DurableStart: a restored task's records checked and its arguments read back, a new task's start record made.
#include "core/durable/durable_start.hpp"

#include <utility>

#include "core/durable/durable_record.hpp"

namespace lua_tasks {

int RestoreStart(lua_State* L, std::string id, std::vector<std::string> records, DurableStart* out,
                 std::string* error) {
  for (size_t i = 0; i < records.size(); ++i) {
    if (!UnsealRecord(&records[i])) {
      *error = "Record " + std::to_string(i) + " of the journal of durable task " + id +
               " is damaged (its checksum does not match).";
      return -1;
    }
  }
  if (records.empty() || records[0].empty() || records[0][0] != static_cast<char>(RecordKind::kStart)) {
    *error = "A durable task's journal does not begin with its start record.";
    return -1;
  }
  std::string why, entry;
  std::optional<std::string> key, label;
  const int count = PushStartRecord(L, std::string_view(records[0]).substr(1), &entry, &key, &why, &label);
  if (count < 0) {
    *error = "A durable task's start record does not read: " + why;
    return -1;
  }
  *out = {std::move(id), "", std::move(records), std::move(entry), std::move(key), std::move(label)};
  return count;
}

bool NewStart(lua_State* L, std::string entry, std::optional<std::string> key, std::optional<std::string> label,
              int nargs, DurableStart* out, std::string* error) {
  std::string start;
  if (!EncodeStartRecord(L, entry, key, -nargs, nargs, &start, error)) return false;
  if (label) LabelStartRecord(&start, *label);
  *out = {"", std::move(start), {}, std::move(entry), std::move(key), std::move(label)};
  return true;
}

}  // namespace lua_tasks
