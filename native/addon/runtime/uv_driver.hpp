// SPDX-License-Identifier: MIT
// UvDriver: drives a runtime's Scheduler from Node's own libuv loop.
#pragma once

#include <cstdint>
#include <functional>

#include <uv.h>

namespace lua_tasks {

class Scheduler;

// One uv_timer_t armed for the earliest deadline, one uv_check_t that runs
// IMMEDIATE batches after I/O polling, and one uv_idle_t, active only while
// tasks are ready, so the poll does not block meanwhile (Node's setImmediate
// does the same). A uv_prepare_t, just before each poll, tells the scheduler
// the loop turned (Scheduler::LoopTurned bounds what one turn runs directly
// from promise settlements). Tasks are queue entries, never handles.
//
// Handle memory is freed only in the last close callback. `run` wraps each
// scheduler call from a libuv callback (handle scope, callback scope, and
// catching every C++ exception).
class UvDriver {
 public:
  using Runner = std::function<void(void (*)(Scheduler*))>;
  UvDriver(uv_loop_t* loop, Scheduler* scheduler, Runner run);
  ~UvDriver();  // closes the handles if Close was not called
  UvDriver(const UvDriver&) = delete;
  UvDriver& operator=(const UvDriver&) = delete;

  // Re-arms after the scheduler changed. Cheap when nothing changed.
  void Sync();
  // Timed waits keep the process alive only while this is true (ref/unref).
  void SetKeepAlive(bool keep);
  // Stops and closes the handles; `done` runs once they are freed.
  void Close(std::function<void()> done);

 private:
  struct Handles;
  static void OnTimer(uv_timer_t* t);
  static void OnCheck(uv_check_t* c);
  static void OnIdle(uv_idle_t* i) {}
  static void OnPrepare(uv_prepare_t* p);
  static void OnClose(uv_handle_t* h);

  Handles* h_;  // owned by libuv from Close until its close callbacks ran
};

}  // namespace lua_tasks
