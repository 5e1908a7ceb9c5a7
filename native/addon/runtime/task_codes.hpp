// SPDX-License-Identifier: MIT
// Task codes: the numbers that carry a task's state and end across to lib/.
#pragma once

#include <cstdint>
#include <optional>

#include <napi.h>

#include "core/scheduling/task.hpp"

namespace lua_tasks {

// Everything here is exported once, as NativeRuntime.constants (TaskCodes
// below), and lib/runtime/task_codes.js reads it from there: JS defines none of
// these names or numbers itself, and a test checks index.d.ts against them.

// What the JS listener onEnd(owner, key, kind, value) hears: a task's end,
// or a Lua callback that failed with no task to fail (key 0).
enum class EndKind : int32_t {
  kDone,
  kFailed,  // its error, a timeout among them, or a result that could not cross
  kCancelled,
  kCallbackFailed,  // not a task: a Lua function JS called from the loop
};
inline constexpr int kEndKindCount = 4;
// The names JS reads them by (a task's are its status names once ended).
const char* EndKindName(EndKind kind);

// A task end as the listener hears it: a timeout is a failure (its error says so).
inline EndKind EndKindOf(TaskEnd end) {
  switch (end) {
    case TaskEnd::kDone:
      return EndKind::kDone;
    case TaskEnd::kCancelled:
      return EndKind::kCancelled;
    case TaskEnd::kFailed:
    case TaskEnd::kTimedOut:
      break;
  }
  return EndKind::kFailed;
}

// rt.start's code (JS_start): key × kStartSlots + (end kind + 1) for a task
// that ended inside the call, key × kStartSlots for one that runs on. Keys
// count up from 1 and stay far below 2^51: the code is an exact double.
inline constexpr uint64_t kStartSlots = 4;
static_assert(static_cast<uint64_t>(EndKind::kCancelled) + 1 < kStartSlots, "a start's end kinds fit beside the key");
inline double PackStart(uint64_t key, std::optional<EndKind> end) {
  return static_cast<double>(key * kStartSlots + (end ? static_cast<uint64_t>(*end) + 1 : 0));
}

// taskState's code (JS_taskState): status | wait << kStateWaitShift, the
// wait being the task's current one (kNone unless it waits).
inline constexpr int kStateWaitShift = 4;
// What resume(), send() and cancel() answer for a task being read from a
// store asynchronously (Activations): lib makes the call once it is restored.
inline constexpr int kAfterRestore = 3;
static_assert(static_cast<int>(TaskStatus::kCancelled) < (1 << kStateWaitShift), "a status fits below the wait");
inline int PackState(TaskStatus status, WaitKind wait) {
  return static_cast<int>(status) | static_cast<int>(wait) << kStateWaitShift;
}

// NativeRuntime.constants: { status, wait, instruction, unit, end } (names
// by code), idKeyDigits, finishedKept, startSlots, stateWaitShift.
Napi::Object TaskCodes(Napi::Env env);

}  // namespace lua_tasks
