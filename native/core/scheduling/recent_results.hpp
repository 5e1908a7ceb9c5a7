// SPDX-License-Identifier: MIT
// RecentResults: the outcomes of the last N ended tasks, found by key in O(1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/host/lua_ref.hpp"

namespace lua_tasks {

enum class TaskStatus : uint8_t;

// Outcome of a task that ended (kept for tasks.wait / tasks.status / rt.task).
struct FinishedTask {
  uint64_t key = 0;
  TaskStatus status{};
  int nres = 0;   // results kept (an error value counts as one)
  LuaRef values;  // none, the one value, or a table {...} of nres results
  // One number or boolean, the result of most short tasks, is kept here and
  // not in `values`: the registry reference taken at the end and dropped
  // when the outcome leaves the ring cost about 600 of the 10,400
  // instructions of a W5 task's life. LUA_TNUMBER or LUA_TBOOLEAN when it is.
  int scalar = LUA_TNONE;
  bool integer = false;  // a number's subtype
  lua_Integer i = 0;     // an integer, or a boolean as 0 or 1
  lua_Number n = 0;      // a float
  // Its results could not be converted for the host, whose view of it is
  // "failed"; Lua still sees it done, with its results.
  bool host_failed = false;
};

// A ring of the last `capacity` outcomes, with an open-addressing index
// (linear probing, backward-shift deletion) so that a lookup never scans the
// ring: tasks.wait on each of 10,000 ended tasks did, 1024 entries a time.
// Nothing here allocates after construction.
class RecentResults {
 public:
  explicit RecentResults(size_t capacity);
  // Keeps `f`, dropping the oldest outcome when full. Keys must be unique.
  void Add(FinishedTask f);
  // The outcome of `key`, or null. Valid until the next Add.
  const FinishedTask* Find(uint64_t key) const;
  FinishedTask* Find(uint64_t key) {
    return const_cast<FinishedTask*>(static_cast<const RecentResults*>(this)->Find(key));
  }
  size_t size() const { return count_; }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  size_t Home(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  void Erase(uint64_t key);

  std::vector<FinishedTask> ring_;
  size_t next_ = 0;  // where the next outcome goes
  size_t count_ = 0;
  std::vector<uint32_t> index_;  // ring positions; size a power of two, at least twice the ring
  int shift_;
};

}  // namespace lua_tasks
