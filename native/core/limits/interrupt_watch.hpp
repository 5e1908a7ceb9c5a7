// SPDX-License-Identifier: MIT
// InterruptWatch: lets the embedder stop Lua that runs on a thread, even with no limit set.
#pragma once

#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace lua_tasks {

class LuaHost;

// How it works. Lua checks nothing on its own while it runs: without a count
// hook a `while true do end` never returns to us, and a hook on every state
// would cost every runtime a check per instruction. So, as Lua's own `lua`
// interpreter does for SIGINT, the hook is set from outside, only when
// needed:
//  - one watchdog thread per thread that runs Lua (a Node main thread or a
//    Worker) samples its hosts every `period`; a host seen running Lua (not
//    host code: JS is V8's to stop) at two samples in a row may be stuck;
//  - it then signals that thread; the handler, running on the Lua thread,
//    calls LuaHost::RequestInterrupt for each host running Lua, which sets a
//    flag and, unless the running coroutine has a count hook already (the
//    CPU budget's, or its own from an earlier round), a count hook of
//    LuaHost::kWatchEvery instructions (lua_sethook is the one Lua call
//    documented as safe from a signal handler). Setting a hook walks the
//    coroutine's whole call stack, so it is done once per entry, not per round:
//    a stack 200,000 calls deep made each round outlast the period under load;
//  - at its next count the hook asks the embedder whether the thread is being
//    torn down (the addon asks Node-API whether JS can still run). If not,
//    Lua goes on (without a budget, the watch's hook stays until the
//    outermost entry returns); if so, the host raises a kill on every
//    instruction until Lua returns to its entry point.
// Long C functions made bounded for the CPU budget ask the same flag at their
// checkpoints, so a Worker's terminate() stops them too.
// The cost when nothing is stuck: two relaxed stores per entry into Lua, and
// a signal plus one Node-API call per `period` of continuous Lua execution.
class InterruptWatch {
 public:
  static constexpr std::chrono::milliseconds kPeriod{100};

  // The watch of the calling thread, made (with its watchdog thread) on
  // first use. Every host running on this thread registers with it.
  static std::shared_ptr<InterruptWatch> ForThisThread();

  // Stops and joins the watchdog. Runs on the owner thread.
  ~InterruptWatch();
  InterruptWatch(const InterruptWatch&) = delete;
  InterruptWatch& operator=(const InterruptWatch&) = delete;

  // Registers or forgets a host; on the owner thread only.
  void Add(LuaHost* host);
  void Remove(LuaHost* host);

  // For the signal handler: asks every registered host that runs Lua now to
  // check for an interrupt. Async-signal-safe; skips if the list is being
  // changed at the moment the signal arrived (the next round retries).
  void InterruptRunning() noexcept;

  // The signal used to reach the owner thread (0 if none could be installed).
  static int Signal();

 private:
  InterruptWatch();
  void Run();
  bool AnyRunningLua();  // holds mu_

  pthread_t owner_;
  std::mutex mu_;  // guards hosts_ against the watchdog; the owner thread is the only writer
  std::condition_variable wake_;
  bool stop_ = false;
  std::vector<LuaHost*> hosts_;
  volatile int changing_ = 0;  // set by the owner around edits of hosts_, read by the signal handler
  std::thread thread_;         // last: starts once the rest is built
};

}  // namespace lua_tasks
