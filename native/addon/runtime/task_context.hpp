// SPDX-License-Identifier: MIT
// TaskContexts: the async context each task's JS calls run in, so AsyncLocalStorage holds across its waits.
//
// How and why. Node keeps whose work a callback is (AsyncLocalStorage stores,
// async_hooks ids) in an async context that flows to the callbacks it
// registers. A task runs inside the call that started it only until its
// first wait; later it is resumed from a loop turn, a resume or a promise of
// somebody else's, whose context the JS it calls would otherwise see.
// So a task that outlives its first run holds a napi_async_context made
// while its starter's call was still on the stack, and every JS function its
// Lua code calls runs through napi_make_callback with it. A task started from
// Lua by a task shares its starter's (reference counted), and the tasks the
// top level of one rt.load starts share one: W2's 10,000 workers share one,
// W11's 100,000 parked tasks too, and the many tasks that end in their first
// run (W8) never make one.
//
// Not napi_open_callback_scope around each resumption: on Node 24 and 26,
// where AsyncLocalStorage is built on AsyncContextFrame, a callback scope
// enters an empty frame whatever context it was given (the store reads
// undefined), while napi_make_callback restores the frame napi_async_init
// captured; on Node 20 and 22 both carry the async_hooks resource, to which
// the init hook copied the store. (Measured with a probe addon on 20.20,
// 22.23, 24.21 and 26.12.) What runs a task's Lua (the loop's callback
// scope, a resume's caller) therefore does not matter: only its calls out.
// What holds, and the cost: docs/async-context.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <node_api.h>

#include "core/scheduling/task.hpp"

namespace lua_tasks {

// A context is a number (Task::context): n is slots_[n - 1], 0 is none.
class TaskContexts {
 public:
  explicit TaskContexts(napi_env env) : env_(env) {}
  ~TaskContexts() { Clear(); }
  TaskContexts(const TaskContexts&) = delete;
  TaskContexts& operator=(const TaskContexts&) = delete;

  // The async context current now, one reference, or 0 if Node-API cannot
  // make one. `entry`: the LuaHost entry whose Lua code (outside any task)
  // started the task, or 0; the context it captured last is reused while
  // that entry is still the innermost (JS it calls ran and returned).
  uint32_t Capture(uint64_t entry);
  // Whether a task that Lua starts while `starter` runs shares the
  // starter's context: not when that Lua is a callback that JS called from
  // the starter's Lua (it may run inside a context that JS entered; the new
  // task captures that one if it outlives its first run).
  bool Shares(const Task& starter) const { return &starter != js_of_; }
  // One more reference.
  void Retain(uint32_t context) { ++slots_[context - 1].refs; }
  // Drops one reference; the last destroys the napi_async_context.
  void Release(uint32_t context);
  // Drops the one kept for reuse (the runtime closes).
  void Clear();
  // Calls fn(argv) with `this` recv, as Lua code running in `task` (nullptr
  // outside any task) calls a JS function: inside the task's context if it
  // has one. Lua run by that JS itself (a callback) keeps that JS's context
  // for its own calls. Returns what napi_call_function would, the exception
  // left pending on failure.
  napi_status Call(Task* task, napi_value recv, napi_value fn, size_t argc, const napi_value* argv, napi_value* out);

  size_t live() const { return slots_.size() - free_.size(); }  // contexts not yet destroyed

 private:
  struct Slot {
    napi_async_context async = nullptr;  // holds its own resource object (none given to napi_async_init)
    uint32_t refs = 0;                   // tasks holding it, and kept_
  };
  napi_env env_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;   // numbers of free slots
  const Task* js_of_ = nullptr;  // the task whose Lua called the innermost JS on the stack, if any
  uint64_t kept_entry_ = 0;      // Capture's last `entry`, and the context it made (one reference)
  uint32_t kept_ = 0;
};

}  // namespace lua_tasks
