// SPDX-License-Identifier: MIT
// LuaRuntime: a runtime's Lua side, assembled in order: host, scheduler, tasks API.
#pragma once

#include <memory>
#include <string>

#include "core/base/clock.hpp"
#include "core/host/lua_host.hpp"
#include "core/scheduling/scheduler.hpp"
#include "core/store/keyed_store.hpp"

namespace lua_tasks {

// The one place a runtime's Lua side is put together, for the addon
// (RuntimeCore is a LuaRuntime with its Node side) and for the core tests.
// The order is fixed: the host first (the state, its libraries and limits,
// and the pattern functions, lua_api_pattern.hpp, in its string library);
// then the scheduler over it (it installs its preemption in the host's CPU
// budget and keeps registry refs in its state); then the tasks API in the
// state's globals (its functions hold the scheduler's address, and
// tasks.store's hold keyed's). Teardown
// is the reverse: the scheduler goes before the host. An embedder adds its
// own parts (print, JS references, an interrupt poll) after Assemble.
class LuaRuntime {
 public:
  LuaRuntime() = default;
  ~LuaRuntime() { Free(); }
  LuaRuntime(const LuaRuntime&) = delete;
  LuaRuntime& operator=(const LuaRuntime&) = delete;

  // Creates the host with `options` (its install_apis is the runtime's own:
  // RegisterPatternApi), the scheduler with `clock` and `hooks` (both must
  // outlive it), and registers the tasks API. On failure returns
  // false with *error saying why (it names memory when memory was short)
  // and leaves both null.
  bool Assemble(const LuaHostOptions& options, const Clock* clock, SchedulerHooks* hooks, std::string* error);

  // Frees the scheduler, then the host. Idempotent. Tasks are not cancelled
  // first: an embedder that wants their <close> variables run cancels them
  // (Scheduler::CancelAll) before.
  void Free() {
    scheduler.reset();
    host.reset();
  }

  // tasks.store's records (lua_api_store.cpp): its functions hold its
  // address, so it outlives the host; the embedder sets its reader.
  KeyedStore keyed;
  std::unique_ptr<LuaHost> host;         // null until assembled, and once freed
  std::unique_ptr<Scheduler> scheduler;  // freed before host (it holds registry refs)
};

}  // namespace lua_tasks
