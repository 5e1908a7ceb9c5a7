// SPDX-License-Identifier: MIT
// TaskContexts: the async context each task's JS calls run in, so AsyncLocalStorage holds across its waits.
#include "addon/runtime/task_context.hpp"

namespace lua_tasks {

uint32_t TaskContexts::Capture(uint64_t entry) {
  if (entry != 0 && entry == kept_entry_ && kept_ != 0) {
    ++slots_[kept_ - 1].refs;
    return kept_;
  }
  napi_handle_scope scope;
  if (napi_open_handle_scope(env_, &scope) != napi_ok) return 0;
  napi_value name;
  napi_async_context async = nullptr;
  // No resource object given: Node makes one and holds it strongly until
  // napi_async_destroy (one given would be held weakly, and on Node 20 the
  // store lives on it).
  const bool ok = napi_create_string_latin1(env_, "lua-tasks.task", NAPI_AUTO_LENGTH, &name) == napi_ok &&
                  napi_async_init(env_, nullptr, name, &async) == napi_ok;
  napi_close_handle_scope(env_, scope);
  if (!ok) return 0;
  uint32_t n;
  if (free_.empty()) {
    slots_.push_back({});
    n = static_cast<uint32_t>(slots_.size());
  } else {
    n = free_.back();
    free_.pop_back();
  }
  slots_[n - 1] = {async, 1};
  if (entry != 0) {
    Clear();
    ++slots_[n - 1].refs;
    kept_ = n;
    kept_entry_ = entry;
  }
  return n;
}

void TaskContexts::Release(uint32_t context) {
  Slot& slot = slots_[context - 1];
  if (--slot.refs > 0) return;
  // Also during teardown: it runs no JS (destroy hooks are queued, and
  // skipped once the environment cannot run JS), and a context left behind
  // would keep its resource object for the isolate's life.
  napi_async_destroy(env_, slot.async);
  slot.async = nullptr;
  free_.push_back(context);
}

void TaskContexts::Clear() {
  const uint32_t kept = kept_;
  kept_ = 0;
  kept_entry_ = 0;
  if (kept != 0) Release(kept);
}

napi_status TaskContexts::Call(Task* task, napi_value recv, napi_value fn, size_t argc, const napi_value* argv,
                               napi_value* out) {
  const uint32_t c = task != nullptr && task != js_of_ ? task->context : 0;
  const Task* outer = js_of_;
  js_of_ = task;
  // make_callback nested in another callback scope (the loop turn's, the
  // caller's) runs no microtasks or nextTicks when it returns, as a plain
  // call does not; and recv is never undefined here (see CallJs).
  const napi_status st = c != 0 ? napi_make_callback(env_, slots_[c - 1].async, recv, fn, argc, argv, out)
                                : napi_call_function(env_, recv, fn, argc, argv, out);
  js_of_ = outer;
  return st;
}

}  // namespace lua_tasks
