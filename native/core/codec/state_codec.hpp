// SPDX-License-Identifier: MIT
// State codec: the persistent tasks.state table to bytes and back (docs/design.md#persistence).
// The one API the rest of the code uses; the format is state_format.hpp's,
// the jobs state_encoder.cpp and state_decoder.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <lua.hpp>

#include "core/base/clock.hpp"
#include "core/base/grow_array.hpp"
#include "core/limits/memory_budget.hpp"

namespace lua_tasks {

class LuaHost;

// Deepest table nesting a snapshot may have (the root table is depth 1). Both
// directions keep a frame per level (no C recursion), and two or three Lua
// stack slots per level on their own thread.
inline constexpr int kMaxStateDepth = 200;
// Largest snapshot written or read, in bytes, checksum included.
inline constexpr size_t kMaxStateBytes = size_t{1} << 30;

// Why a job failed.
enum class CodecFailure : uint8_t {
  kNone,
  // Decoding: the bytes are not an intact snapshot this build reads: bad
  // magic, unknown version, checksum mismatch, truncation, bad structure,
  // larger than kMaxStateBytes. (The store's copy is damaged.)
  kCorrupt,
  // Encoding: a value that cannot persist, nesting past kMaxStateDepth, or
  // a snapshot past kMaxStateBytes. (The state is at fault.)
  kValue,
  // Either way: out of memory (the Lua stack, the output, the table index),
  // or, decoding under a CodecGuard's memory, past the state's memoryLimit.
  // Neither the bytes nor the state are at fault.
  kNoRoom,
  // Encoding: the snapshot would pass the CodecGuard's max_bytes (the
  // caller's limit, e.g. maxValueBytes: the caller names it).
  kTooLarge,
  // Either way: the CodecGuard's host said stop (taskTimeout, or the thread
  // shuts down): the caller raises LuaHost::RaiseStop once the job is gone.
  kStopped,
};

// What a job may spend beyond its format's own limits, for work done on a
// script's behalf (docs/security.md#persistence-routes). The defaults bound
// nothing more.
struct CodecGuard {
  // Encoding: the largest snapshot, checksum included (at most kMaxStateBytes).
  size_t max_bytes = kMaxStateBytes;
  // Decoding: fails (kNoRoom) once the state holds more than memory->limit
  // (when not 0): the job runs under a HostSection, where the allocator does
  // not refuse, so it checks for itself every check interval and before
  // each long string.
  const MemoryBudget* memory = nullptr;
  // Both: asks stop->StopDue() every check interval and fails (kStopped)
  // when it answers true.
  LuaHost* stop = nullptr;
};

// A finished snapshot, in one block of its own: the addon hands it to a JS
// Buffer as it is (the Buffer's finalizer destroys it) instead of copying
// megabytes on the loop. Move-only.
class SnapshotBytes {
 public:
  SnapshotBytes() = default;

  const char* data() const { return bytes_.data(); }
  size_t size() const { return bytes_.size(); }
  std::string_view view() const { return {bytes_.data(), bytes_.size()}; }

 private:
  friend class StateEncoder;  // fills it
  explicit SnapshotBytes(GrowArray<char> bytes) : bytes_(std::move(bytes)) {}
  // Its block: a large snapshot grew by remapping pages, not copying them.
  GrowArray<char> bytes_;
};

// Where a job stands after a Step.
enum class CodecProgress : uint8_t { kMore, kDone, kFailed };

// Both jobs work in slices: Step(clock, budget_ns) works until the job ends
// or, checking the clock every check_interval units of work (a value, or 256
// bytes of string or checksum), finds budget_ns spent; the next Step goes on
// from there. Each Step does at least one interval of work, so a loop of
// Steps always ends. A null clock runs the job to its end.
//
// Their working values live on a Lua thread of their own, anchored in the
// registry for the job's life, so a job depends on no caller's stack between
// slices. While a job is unfinished nothing else may run on the state (the
// encoder's lua_next must not see a table change under it): the embedder
// finishes the job first (LuaHost::set_entry_hook).
//
// Neither direction raises a Lua error: raw accessors only (no metamethods
// run), and the calls that allocate (the thread, the decoder's tables and
// strings) run under the caller's LuaHost::HostSection, where the budgeted
// allocator does not refuse for the memory limit. Construct and Step a job,
// and destroy it, under a HostSection, and before the state is closed.

// Encodes a value into a snapshot (format: state_format.hpp).
class StateEncoder {
 public:
  static constexpr uint32_t kCheckInterval = 4096;

  // Starts encoding the value at `idx` of L (any thread of the state; L's
  // stack is left as it was). Error paths start with `root_name` in Lua
  // syntax: "state.players[3].onHit: cannot persist a function".
  StateEncoder(lua_State* L, int idx, const char* root_name = "state", CodecGuard guard = {});
  ~StateEncoder();
  StateEncoder(const StateEncoder&) = delete;
  StateEncoder& operator=(const StateEncoder&) = delete;

  CodecProgress Step(const Clock* clock, int64_t budget_ns);
  CodecProgress Finish() { return Step(nullptr, 0); }
  CodecProgress progress() const;

  // After kDone: the snapshot, checksum included; TakeBytes moves it out.
  std::string_view bytes() const;
  SnapshotBytes TakeBytes();
  // After kFailed: lowercase, no trailing period, starting with the path, for
  // a function, coroutine, userdata or light userdata anywhere (value or
  // key), nesting past kMaxStateDepth, or a snapshot past kMaxStateBytes.
  const std::string& error() const;
  CodecFailure failure() const;

  // Units of work between clock checks; tests use 1 to stop at every value.
  void set_check_interval(uint32_t units);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// Decodes a snapshot. Memory use is bounded by a constant times the
// snapshot's size, whatever its bytes claim. The version 3 checksum is
// verified, in slices, before any table is built.
class StateDecoder {
 public:
  static constexpr uint32_t kCheckInterval = StateEncoder::kCheckInterval;

  // `bytes` must stay alive and unchanged until the job is destroyed. L: any
  // thread of the state. Stops the collector for the job's life (everything
  // decoded stays live until the end, so a collection would be wasted work,
  // and no finalizer runs in the middle); it runs again when the job ends or
  // is dropped, unless it was stopped before.
  StateDecoder(lua_State* L, std::string_view bytes, CodecGuard guard = {});
  ~StateDecoder();
  StateDecoder(const StateDecoder&) = delete;
  StateDecoder& operator=(const StateDecoder&) = delete;

  CodecProgress Step(const Clock* clock, int64_t budget_ns);
  CodecProgress Finish() { return Step(nullptr, 0); }
  CodecProgress progress() const;

  // After kDone, once: pushes the decoded value onto L (needs one free slot).
  void PushResult(lua_State* L);
  // After kFailed: what was wrong, e.g. "corrupt state snapshot: checksum
  // mismatch", "corrupt state snapshot: truncated value at byte 1234".
  const std::string& error() const;
  CodecFailure failure() const;

  void set_check_interval(uint32_t units);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// Whether `bytes` is a whole checksummed snapshot (the magic, a version this
// build reads that has a checksum, the checksum right), without decoding it:
// for a store that checks what it hands out. False with *why ("not a
// lua-tasks value snapshot", "value snapshot version 9 is not supported",
// "checksum mismatch").
bool SnapshotFrameIntact(std::string_view bytes, std::string* why);

// One-shot encode of the value at `idx` of L into *out (replacing its
// contents). Returns false, with *out empty, and sets *error (as
// StateEncoder::error). Stack unchanged. Caller holds a HostSection.
// *failure, when given, says why.
bool EncodeState(lua_State* L, int idx, std::string* out, std::string* error, const char* root_name = "state",
                 const CodecGuard& guard = {}, CodecFailure* failure = nullptr);

// One-shot decode: pushes the value onto L. Returns false (nothing pushed)
// and sets *error, and *failure when given, for bytes that are not a
// complete, valid snapshot. Caller holds a HostSection.
bool DecodeState(lua_State* L, std::string_view bytes, std::string* error, CodecFailure* failure = nullptr,
                 const CodecGuard& guard = {});

}  // namespace lua_tasks
