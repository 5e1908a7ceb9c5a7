// SPDX-License-Identifier: MIT
// JournalRestore: a runtime's stored durable records, grouped per task for Runtime.open.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace lua_tasks {

// Runtime.open reads every journal and inbox record of its name in one pass
// (a store's range scan, or pages of a JS store's reader) and hands them here
// in key order; the restore then takes each task's records once, by id, as it
// starts the task. No JS value is made per record (docs/durable.md#restore).
class JournalRestore {
 public:
  struct Inbox {
    std::vector<std::string> keys;  // "<task id>/<seq>", oldest first
    std::vector<std::string> records;
  };

  // One stored record of space 2 (a journal) or 3 (an inbox), keys
  // "<task id>/<seq>", in key order within its space; or of space 4 (the
  // index, key "<task id>"), where only a finished task's end record counts
  // (as its record 0). Other spaces are ignored.
  void Add(int space, std::string_view key, std::string_view value);

  // The tasks that have a journal, in the order their first records came.
  const std::vector<std::string>& ids() const { return ids_; }
  // The first record of task `id` (its start or end record), or nullptr.
  const std::string* First(std::string_view id) const;
  // Task `id`'s journal, moved out (empty if none or taken).
  std::vector<std::string> TakeJournal(std::string_view id);
  // Task `id`'s messages not yet received, moved out.
  Inbox TakeInbox(std::string_view id);

  size_t records() const { return records_; }

 private:
  struct Group {
    std::vector<std::string> journal;
    Inbox inbox;
  };
  Group* Find(std::string_view id);

  // Looked up by string_view: no string made for a lookup.
  struct IdHash {
    using is_transparent = void;
    size_t operator()(std::string_view id) const { return std::hash<std::string_view>{}(id); }
  };
  std::unordered_map<std::string, Group, IdHash, std::equal_to<>> groups_;
  std::vector<std::string> ids_;
  // The group the last record went to: records of one task come together.
  std::string last_id_;
  Group* last_ = nullptr;
  size_t records_ = 0;
};

}  // namespace lua_tasks
