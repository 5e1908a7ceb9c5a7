// SPDX-License-Identifier: MIT
// UvDriver: drives a runtime's Scheduler from Node's own libuv loop.
#include "addon/runtime/uv_driver.hpp"

#include <algorithm>
#include <memory>

#include "core/scheduling/scheduler.hpp"

namespace lua_tasks {

namespace {
// Re-arm at least this often, so a suspended machine or a clock change is
// noticed (wall-clock waits are re-checked by the scheduler itself).
constexpr uint64_t kMaxArmMs = 30000;
}  // namespace

struct UvDriver::Handles {
  uv_timer_t timer;
  uv_check_t check;
  uv_idle_t idle;
  uv_prepare_t prepare;
  Scheduler* scheduler;  // null once closing
  Runner run;
  int64_t armed = INT64_MIN;  // deadline the timer is armed for
  bool idle_on = false;
  bool keep_alive = true;
  int open = 4;
  std::function<void()> done;
};

UvDriver::UvDriver(uv_loop_t* loop, Scheduler* scheduler, Runner run) {
  auto h = std::make_unique<Handles>();
  h->scheduler = scheduler;
  h->run = std::move(run);
  uv_timer_init(loop, &h->timer);
  uv_check_init(loop, &h->check);
  uv_idle_init(loop, &h->idle);
  uv_prepare_init(loop, &h->prepare);
  h->timer.data = h->check.data = h->idle.data = h->prepare.data = h.get();
  uv_check_start(&h->check, OnCheck);
  uv_unref(reinterpret_cast<uv_handle_t*>(&h->check));  // the check never holds the loop
  uv_prepare_start(&h->prepare, OnPrepare);
  uv_unref(reinterpret_cast<uv_handle_t*>(&h->prepare));  // nor does the prepare
  h_ = h.release();
}

UvDriver::~UvDriver() {
  if (h_ != nullptr) Close(nullptr);
}

void UvDriver::Sync() {
  Handles* h = h_;
  if (h == nullptr || h->scheduler == nullptr) return;
  Scheduler* s = h->scheduler;
  if (s->locked()) {  // a COMMIT's snapshot is being taken: nothing runs until it is
    if (h->armed != INT64_MIN) uv_timer_stop(&h->timer);
    h->armed = INT64_MIN;
    if (h->idle_on) uv_idle_stop(&h->idle);
    h->idle_on = false;
    return;
  }
  if (s->HasTimers()) {
    const int64_t deadline = s->NextDeadline();
    if (deadline != h->armed || !uv_is_active(reinterpret_cast<uv_handle_t*>(&h->timer))) {
      const int64_t now = s->clock()->MonoNs();
      // Round up: libuv timers have millisecond resolution and must not fire early.
      const uint64_t ms = deadline <= now ? 0 : std::min<uint64_t>((deadline - now + 999999) / 1000000, kMaxArmMs);
      uv_update_time(h->timer.loop);
      uv_timer_start(&h->timer, OnTimer, ms, 0);
      h->armed = deadline;
    }
    if (h->keep_alive) {
      uv_ref(reinterpret_cast<uv_handle_t*>(&h->timer));
    } else {
      uv_unref(reinterpret_cast<uv_handle_t*>(&h->timer));
    }
  } else if (h->armed != INT64_MIN) {
    uv_timer_stop(&h->timer);
    h->armed = INT64_MIN;
  }
  if (s->HasReady() != h->idle_on) {
    h->idle_on = s->HasReady();
    if (h->idle_on) {
      uv_idle_start(&h->idle, OnIdle);
    } else {
      uv_idle_stop(&h->idle);
    }
  }
}

void UvDriver::SetKeepAlive(bool keep) {
  if (h_ == nullptr) return;
  h_->keep_alive = keep;
  h_->armed = INT64_MIN;
  Sync();
}

void UvDriver::OnTimer(uv_timer_t* t) {
  auto* h = static_cast<Handles*>(t->data);
  h->armed = INT64_MIN;
  if (h->scheduler == nullptr) return;
  h->run([](Scheduler* s) { s->RunTimers(); });
}

void UvDriver::OnCheck(uv_check_t* c) {
  auto* h = static_cast<Handles*>(c->data);
  if (h->scheduler == nullptr || !h->scheduler->HasReady()) return;
  h->run([](Scheduler* s) { s->RunImmediate(); });
}

void UvDriver::OnPrepare(uv_prepare_t* p) {
  auto* h = static_cast<Handles*>(p->data);
  if (h->scheduler != nullptr) h->scheduler->LoopTurned();
}

void UvDriver::Close(std::function<void()> done) {
  Handles* h = h_;
  if (h == nullptr) return;
  h_ = nullptr;
  h->scheduler = nullptr;
  h->done = std::move(done);
  uv_close(reinterpret_cast<uv_handle_t*>(&h->timer), OnClose);
  uv_close(reinterpret_cast<uv_handle_t*>(&h->check), OnClose);
  uv_close(reinterpret_cast<uv_handle_t*>(&h->idle), OnClose);
  uv_close(reinterpret_cast<uv_handle_t*>(&h->prepare), OnClose);
}

void UvDriver::OnClose(uv_handle_t* handle) {
  auto* h = static_cast<Handles*>(handle->data);
  if (--h->open > 0) return;
  std::unique_ptr<Handles> owned(h);
  if (owned->done) owned->done();
}

}  // namespace lua_tasks
