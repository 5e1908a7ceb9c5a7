// SPDX-License-Identifier: MIT
// KeptEnds: the end records of the latest durable tasks that ended, by key, for joins that come late.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>

namespace lua_tasks {

// A join of a durable task that ended long ago (a durable parent's child,
// joined after a restart or after 1,024 other tasks ended) answers from its
// end record, kept here. Bounded, so a runtime that runs for months does
// not keep every end: the latest kMaxCount ends within kMaxBytes, the
// oldest dropped first (a join of one dropped answers "no such task", as
// for any task finished too long ago: docs/durable.md#children).
class KeptEnds {
 public:
  static constexpr size_t kMaxCount = 100'000;
  static constexpr size_t kMaxBytes = size_t{64} << 20;

  // Keeps `payload` as the end of `key` (replacing one kept before); one
  // larger than kMaxBytes / 16 is not kept.
  void Put(uint64_t key, std::string payload);
  const std::string* Find(uint64_t key) const;
  void Erase(uint64_t key);
  size_t size() const { return ends_.size(); }
  size_t bytes() const { return bytes_; }

 private:
  std::unordered_map<uint64_t, std::string> ends_;
  std::deque<uint64_t> order_;  // keys as kept, oldest first (a key erased since is skipped)
  size_t bytes_ = 0;
  void Trim();
};

}  // namespace lua_tasks
