// SPDX-License-Identifier: MIT
// Codec slices: where an encode or decode job stands, and how much work one
// Step does before it looks at the clock and its CodecGuard.
//
// WHY jobs in slices:
// - Both directions are loops over an explicit stack of frames, one per open
//   table, with their Lua values on a thread of their own: a job can stop at
//   any pair boundary and go on in a later loop turn, and nesting costs no C
//   stack. The hot path (a pair of scalars) stays inside one frame's loop.
// - Neither direction may raise a Lua error: they are C++ frames holding
//   std::string and std::vector (STYLE §3). They use raw accessors only, no
//   metamethods, and run under the caller's LuaHost::HostSection, where the
//   allocator does not refuse for the memory limit.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/base/clock.hpp"
#include "core/codec/state_codec.hpp"
#include "core/host/lua_host.hpp"
#include "core/limits/memory_budget.hpp"

namespace lua_tasks {

// Bytes of string or checksum work per unit of a job's check interval.
inline constexpr size_t kCrcBytesPerUnit = 256;

// Where a job stands; both directions end with kDone or kFailed.
enum class CodecStage : uint8_t { kStart, kBody, kChecksum, kDone, kFailed };

// How much work a Step does between clock checks, and until when. A unit is
// a value, or 256 bytes of string or checksum. At each check it also asks
// the job's CodecGuard: a stop due, or (decoding) the state past its limit,
// halts the job.
class CodecSlice {
 public:
  enum class Halt : uint8_t { kNone, kStop, kMemory };
  explicit CodecSlice(const CodecGuard& guard) : guard_(guard) {}
  const CodecGuard& guard() const { return guard_; }
  Halt halt() const { return halt_; }
  // The state's memory would pass its limit with `more` bytes.
  bool OverMemory(size_t more) const {
    const MemoryBudget* m = guard_.memory;
    return m != nullptr && m->limit != 0 && (m->used > m->limit || more > m->limit - m->used);
  }
  void set_interval(uint32_t units) {
    interval_ = std::max<uint32_t>(units, 1);
    work_ = std::min<int64_t>(work_, interval_);
  }
  uint32_t interval() const { return interval_; }
  void Start(const Clock* clock, int64_t budget_ns) {
    clock_ = clock;
    deadline_ = clock != nullptr ? clock->MonoNs() + budget_ns : 0;
  }
  // Called at a point where the job can stop: true once the budget is spent
  // or the job must halt (halt() says which). Reads the clock once per interval.
  bool Due() {
    if (work_ > 0) [[likely]]
      return false;
    work_ = interval_;
    return Halted() || (clock_ != nullptr && clock_->MonoNs() >= deadline_);
  }
  // The same for bulk work (the checksum) done a chunk at a time.
  bool DueNow() { return Halted() || (clock_ != nullptr && clock_->MonoNs() >= deadline_); }
  void Spend(int64_t units) { work_ -= units; }

 private:
  bool Halted() {
    if (halt_ == Halt::kNone) {
      if (guard_.stop != nullptr && guard_.stop->StopDue()) {
        halt_ = Halt::kStop;
      } else if (OverMemory(0)) {
        halt_ = Halt::kMemory;
      }
    }
    return halt_ != Halt::kNone;
  }

  CodecGuard guard_;
  Halt halt_ = Halt::kNone;
  const Clock* clock_ = nullptr;
  int64_t deadline_ = 0;
  uint32_t interval_ = StateEncoder::kCheckInterval;
  int64_t work_ = StateEncoder::kCheckInterval;  // units left before the next clock read
};

// A job's progress as its callers see it.
inline CodecProgress ProgressOf(CodecStage stage) {
  return stage == CodecStage::kDone     ? CodecProgress::kDone
         : stage == CodecStage::kFailed ? CodecProgress::kFailed
                                        : CodecProgress::kMore;
}

}  // namespace lua_tasks
