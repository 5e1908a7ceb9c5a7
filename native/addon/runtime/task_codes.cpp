// SPDX-License-Identifier: MIT
// Task codes: the numbers that carry a task's state and end across to lib/.
#include "addon/runtime/task_codes.hpp"

#include <string_view>

#include "core/durable/durable_record.hpp"
#include "core/scheduling/scheduler.hpp"

namespace lua_tasks {

const char* EndKindName(EndKind kind) {
  switch (kind) {
    case EndKind::kDone:
      return "done";
    case EndKind::kFailed:
      return "failed";
    case EndKind::kCancelled:
      return "cancelled";
    case EndKind::kCallbackFailed:
      return "callbackFailed";
  }
  return "failed";
}

namespace {

// An array of the names of codes 0 .. n-1.
template <typename Name>
Napi::Array Names(Napi::Env env, uint32_t n, Name name) {
  Napi::Array out = Napi::Array::New(env, n);
  for (uint32_t i = 0; i < n; ++i) out.Set(i, name(i));
  return out;
}

// WaitKind has no count: its names run up to the first that is not its
// own (WaitKindName answers "NONE" past the last).
uint32_t WaitKindCount() {
  uint32_t n = 1;
  while (std::string_view(WaitKindName(static_cast<WaitKind>(n))) != "NONE") ++n;
  return n;
}

}  // namespace

Napi::Object TaskCodes(Napi::Env env) {
  Napi::Object codes = Napi::Object::New(env);
  codes.Set("status", Names(env, static_cast<uint32_t>(TaskStatus::kCancelled) + 1,
                            [](uint32_t i) { return TaskStatusName(static_cast<TaskStatus>(i)); }));
  codes.Set("wait", Names(env, WaitKindCount(), [](uint32_t i) { return WaitKindName(static_cast<WaitKind>(i)); }));
  codes.Set("instruction", Names(env, kKindCount, [](uint32_t i) { return KindName(static_cast<int>(i)); }));
  codes.Set("unit", Names(env, kUnitCount, [](uint32_t i) { return UnitName(static_cast<Unit>(i)); }));
  codes.Set("end", Names(env, kEndKindCount, [](uint32_t i) { return EndKindName(static_cast<EndKind>(i)); }));
  codes.Set("idKeyDigits", static_cast<double>(Scheduler::kIdKeyDigits));
  codes.Set("finishedKept", static_cast<double>(Scheduler::kFinishedKept));
  codes.Set("startSlots", static_cast<double>(kStartSlots));
  codes.Set("stateWaitShift", static_cast<double>(kStateWaitShift));
  codes.Set("afterRestore", static_cast<double>(kAfterRestore));
  codes.Set("indexMarkKey", kIndexMarkKey);
  codes.Set("indexMark", kIndexMarkDefault);
  return codes;
}

}  // namespace lua_tasks
