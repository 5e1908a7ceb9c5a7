// SPDX-License-Identifier: MIT
// LuaHost: one Lua state, its allocator, its libraries, and protected entry.
#pragma once

#include <atomic>
#include <csignal>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <lua.hpp>

#include "core/base/clock.hpp"
#include "core/host/lua_libs.hpp"
#include "core/limits/cpu_budget.hpp"
#include "core/limits/memory_budget.hpp"

namespace lua_tasks {

struct LuaHostOptions {
  LibProfile libs;
  size_t memory_limit = 0;      // bytes; 0 = unlimited
  int64_t time_slice_ns = 0;    // timeSlice; 0 = never preempt
  int64_t task_timeout_ns = 0;  // taskTimeout; 0 = no CPU budget
  // Required when either limit is set. Also what os.time() and os.date()
  // read, so Lua's idea of "now" is the scheduler's (null: the C library's).
  const Clock* clock = nullptr;
  // Register with this thread's InterruptWatch, so Lua that runs too long
  // can be stopped when the embedder's poll says so (set_interrupt_poll).
  bool interruptible = false;
  // The embedder's Lua APIs, installed in every state right after the
  // standard libraries and before any Lua runs (LuaRuntime passes
  // RegisterPatternApi, lua_api_pattern.hpp). The host offers the
  // point and knows no API. Called in protected mode; may raise (memory).
  void (*install_apis)(lua_State* L) = nullptr;
};

class InterruptWatch;

// Owns a lua_State. The LuaHost pointer lives in the state's extra space, so
// every thread of the state finds it with LuaHost::From(L).
//
// Calling convention for the C++ around it: Lua API calls made by host code
// outside protected mode must not raise. Allocation is the only way the calls
// we make there can fail, and MemoryBudget never refuses while `enforce` is off
// (see memory_budget.hpp); Enter turns enforcement on for the Lua code it runs.
class alignas(16) LuaHost {
 public:
  // Creates the state and opens the profile's libraries; on failure returns
  // nullptr and sets *error.
  static std::unique_ptr<LuaHost> Create(const LuaHostOptions& options, std::string* error);
  ~LuaHost();
  LuaHost(const LuaHost&) = delete;
  LuaHost& operator=(const LuaHost&) = delete;

  static LuaHost* From(lua_State* L) {
    return reinterpret_cast<LuaHost*>(*static_cast<uintptr_t*>(lua_getextraspace(L)) & ~kMarks);
  }
  // A task's coroutine is marked in the low bit of its extra space (the host
  // pointer there is aligned, and a new thread copies the main thread's, so
  // it starts unmarked). Lua code holding a task's coroutine (from
  // coroutine.running()) must not resume or close it behind the scheduler.
  static void SetTaskMark(lua_State* co, bool on) {
    auto* bits = static_cast<uintptr_t*>(lua_getextraspace(co));
    *bits = on ? (*bits | kTaskMark) : (*bits & ~kTaskMark);
  }
  static bool HasTaskMark(lua_State* co) { return (*static_cast<uintptr_t*>(lua_getextraspace(co)) & kTaskMark) != 0; }
  // A coroutine the CPU budget's kill was raised in (from its hook, after
  // which Lua runs no hooks in it): closing it would run its <close>
  // handlers unbounded, so the scheduler and the Lua glue do not.
  static void SetKilledMark(lua_State* co) { *static_cast<uintptr_t*>(lua_getextraspace(co)) |= kKilledMark; }
  static bool HasKilledMark(lua_State* co) {
    return (*static_cast<uintptr_t*>(lua_getextraspace(co)) & kKilledMark) != 0;
  }
  // A coroutine that runs as a detached part of its task (the scheduler
  // resumes it: Scheduler::Detach), and one parked after a plain yield from
  // there: its yielded values wait on its stack for its resumer's next resume.
  static void SetMark(lua_State* co, uintptr_t mark, bool on) {
    auto* bits = static_cast<uintptr_t*>(lua_getextraspace(co));
    *bits = on ? (*bits | mark) : (*bits & ~mark);
  }
  static bool HasMark(lua_State* co, uintptr_t mark) {
    return (*static_cast<uintptr_t*>(lua_getextraspace(co)) & mark) != 0;
  }
  static bool HasPartMark(lua_State* co) { return HasMark(co, kPartMark); }

  lua_State* main() const { return L_; }
  // The innermost thread running Lua code now, or the main thread when none
  // runs. A call into Lua made while Lua is running (Lua -> JS -> Lua) goes on
  // this thread, so a yield inside it is refused by Lua itself.
  lua_State* current() const { return current_; }
  int depth() const { return depth_; }
  // The innermost Entry on the stack, by a number no other Entry of this
  // host had (0: none). Lua code run by one entry from the host shares it.
  uint64_t entry_id() const { return entry_; }

  // Loads a text chunk onto L. Returns a Lua status; on error the message is
  // on top of the stack. Binary chunks are refused. The embedder's source is
  // trusted: no stop check while it parses (Lua's load has one).
  int Load(lua_State* L, std::string_view source, const char* chunkname);

  // lua_pcall with the traceback handler. Stack: [func, args...] -> results,
  // or the error value on failure (the traceback is in last_traceback()).
  // The caller holds an Entry. The main thread's slot 1 always holds the
  // handler: nobody may set the main thread's top below 1.
  int PCall(lua_State* L, int nargs, int nresults);

  // The message and traceback captured for the last runtime error of PCall.
  // The message is the error value as text: a string or number as is, else its
  // __tostring, else "(error object is a <type> value)".
  const std::string& last_message() const { return message_; }
  const std::string& last_traceback() const { return traceback_; }

  // For the embedder (the addon's RuntimeCore); not owned.
  void* embedder = nullptr;
  // The Scheduler running tasks on this state, set by its constructor and
  // cleared by its destructor; not owned. For the C functions on every
  // yield: reached through the extra space, it costs a few instructions
  // where reading a closure's upvalue (lua_touserdata) costs 30.
  void* scheduler = nullptr;

  // ---- The embedder's scope for calls out of Lua ----
  // A call out of Lua into the embedder (a JS function) makes values that
  // need a scope (a Node-API handle scope: a heap allocation and a free, an
  // eighth of the call). The embedder may keep one open across the calls
  // that Lua code of one entry makes, and renew it as it likes; the entry
  // closes it with the closer when it returns. Scopes nest: one opened since
  // by host code must close first. So the entry's own Lua code may use it
  // (DirectCallScope), and may open or close it only where Lua is not
  // running a finalizer (MayMoveCallScope): an allocation in host code may
  // run one, inside a scope of that code's own.
  struct CallScope {
    void* handle = nullptr;  // the embedder's, or null while none is open
    uint32_t calls = 0;      // the embedder's: calls made in `handle`
    int sections = 0;        // live HostSections when the entry began
  };
  using CallScopeCloser = void (*)(void* ctx, void* handle);
  void set_call_scope_closer(CallScopeCloser fn, void* ctx) {
    call_scope_closer_ = fn;
    call_scope_ctx_ = ctx;
  }
  // The running entry's CallScope if the Lua code of that entry calls out
  // directly (no HostSection opened since it began, which host code that
  // runs Lua holds), else null: the call takes a scope of its own.
  CallScope* DirectCallScope() {
    return depth_ > 0 && sections_ == call_scope_.sections && call_scope_closer_ != nullptr ? &call_scope_ : nullptr;
  }
  // Whether the CallScope may be opened or closed now. Inside a finalizer
  // Lua reports its collector stopped; a collector stopped by Lua code
  // (collectgarbage "stop") sends calls to scopes of their own too.
  static bool MayMoveCallScope(lua_State* L) { return lua_gc(L, LUA_GCISRUNNING) == 1; }

  // ---- Interrupts (see interrupt_watch.hpp) ----
  // Answers whether the thread is being torn down and Lua must stop now.
  using InterruptPoll = bool (*)(void* ctx);
  void set_interrupt_poll(InterruptPoll fn, void* ctx) {
    poll_ = fn;
    poll_ctx_ = ctx;
  }
  // Lua code, or host code it called, is on the C stack now (an Entry is
  // open). Read by the watchdog.
  bool RunningLua() const { return in_lua_.load(std::memory_order_relaxed); }
  // From the signal handler, on the Lua thread: have the running coroutine
  // check within kWatchEvery instructions. Without a CPU budget the watch's
  // count hook it sets stays until the outermost entry returns, so later
  // rounds only set the flag. Async-signal-safe.
  void RequestInterrupt() noexcept;
  static constexpr int kWatchEvery = 1000;
  // True once the poll said the thread is being torn down: from then on Lua
  // is stopped at every instruction, and nothing should enter it.
  bool terminating() const { return terminating_; }
  // For long C functions' checkpoints: if an interrupt was requested, polls;
  // true if Lua must stop (then raise with RaiseTerminating).
  bool InterruptDue();
  // Raises the stop on L and makes every later instruction raise it again,
  // so it reaches the entry point past any pcall. Never returns.
  int RaiseTerminating(lua_State* L);
  // lua_pcall(L, nargs, nresults, 0) with co as running() meanwhile, for
  // coroutine.close: the <close> handlers it runs run on co, so an
  // interrupt must set its hook there.
  int PCallOn(lua_State* co, lua_State* L, int nargs, int nresults) {
    lua_State* outer = running_;
    running_ = co;
    const int status = lua_pcall(L, nargs, nresults, 0);
    running_ = outer;
    return status;
  }
  // The count hook every thread of the state runs under: an interrupt
  // request first, then the CPU budget.
  static void Hook(lua_State* L, lua_Debug* ar);

  // Set once the runtime is torn down (by ~Scheduler: the tasks functions
  // hold its address): lua_close then runs the remaining finalizers.
  // Lua-facing functions that need the scheduler or JS call RaiseIfClosing
  // first, instead of touching what is freed. Raises nothing else and owns
  // no C++ object, so it may open any lua_CFunction.
  void set_closing() { closing_ = true; }
  static void RaiseIfClosing(lua_State* L) {
    if (From(L)->closing_) {
      luaL_error(L,
                 "the runtime is closed: code run while it closes (a __gc finalizer) cannot use the tasks "
                 "functions or JS values");
    }
  }

  MemoryBudget& memory() { return memory_; }
  // Null without timeSlice and taskTimeout.
  CpuBudget* budget() { return budget_.get(); }
  // The scheduler's clock (LuaHostOptions::clock); null if none was given.
  const Clock* clock() const { return clock_; }

  // The one stop check of long C functions: the bounded library
  // functions (lua_api_bounded*.cpp), the pattern matcher and load's reader
  // ask it as they work, through WorkMeter. True once the code running now
  // must stop: its window's taskTimeout deadline has passed, or the thread
  // shuts down (interrupt_watch.hpp). Cheap, and works in every runtime.
  bool StopDue() { return InterruptDue() || (budget_ != nullptr && budget_->StopDue()); }
  // Raises the stop that StopDue announced, on L (the thread the C function
  // runs on). Never returns.
  static int RaiseStop(lua_State* L) {
    LuaHost* host = From(L);
    if (host->terminating_ || host->budget_ == nullptr) return host->RaiseTerminating(L);
    return host->budget_->RaiseKill(L);
  }
  // Work L just did took time its instruction count does not see (a long C
  // call): with a budget, its next instruction reads the clock. Never raises.
  void Charge(lua_State* L) {
    if (budget_) budget_->Charge(L);
  }

  // The thread running Lua code now, nested coroutines included (current()
  // is the innermost thread entered from C++); null when none runs. Kept by
  // Entry, coroutine.resume (lua_api_coroutine.cpp) and coroutine.close
  // (lua_coroutine.cpp): the allocator's large-allocation charge and an
  // interrupt's hook go to this thread.
  lua_State* running() const { return running_; }
  void set_running(lua_State* L) { running_ = L; }
  // True if the last outermost call from JS was killed by taskTimeout.
  bool last_killed() const { return last_killed_; }

  // ---- Work that must end before anything else touches the state ----
  // A codec job sliced across loop turns (state_codec.hpp) walks tables that
  // nothing may change between its slices. While one is unfinished its owner
  // sets this hook, and the next Entry or HostSection to open, from any
  // caller, runs fn(ctx) first, which finishes the job. The hook is cleared
  // before it runs (the code it runs opens sections of its own), so it runs
  // at most once per set. One hook at a time; fn null clears it.
  using EntryHook = void (*)(void* ctx);
  void set_entry_hook(EntryHook fn, void* ctx) {
    entry_hook_ = fn;
    entry_hook_ctx_ = ctx;
  }
  bool has_entry_hook() const { return entry_hook_ != nullptr; }

  // Frees a registry slot now if no Lua code runs, else at the next safe point.
  // Finalizers of JS objects call this at any moment, even in the middle of a
  // conversion, so it never touches the stack of a running thread.
  void DeferUnref(int ref) { deferred_unrefs_.push_back(ref); }

  // RAII: marks Lua code as running on `L` for the lifetime of the object.
  // Safe around lua_pcall/lua_resume (they never longjmp to their caller).
  // Inline: every task wake opens one.
  class Entry {
   public:
    Entry(LuaHost* host, lua_State* L)
        : host_(host),
          saved_current_(host->current_),
          saved_running_(host->running_),
          saved_enforce_(host->memory_.enforce),
          saved_in_lua_(host->in_lua_.load(std::memory_order_relaxed)),
          saved_entry_(host->entry_),
          saved_call_scope_(host->call_scope_) {
      // Before anything below: the hook's own sections restore what they change.
      if (host->entry_hook_ != nullptr) [[unlikely]]
        host->RunEntryHook();
      host->call_scope_ = {nullptr, 0, host->sections_};
      host->current_ = L;
      host->running_ = L;
      host->in_lua_.store(true, std::memory_order_relaxed);
      host->memory_.enforce = true;
      // A call from JS with nothing running opens a CPU window; tasks open
      // their own (Scheduler::RunTask), and nested calls keep the outer one.
      if (host->budget_) {
        if (!host->budget_->active()) OpenWindow();
        host->budget_->Sync(L);
      }
      if (host->depth_++ == 0) host->stack_base_ = StackPoint();
      host->entry_ = ++host->entries_;
      // Stopped for good: Lua entered now (a task started by a loop that
      // caught the stop) stops at its first instruction, not at the next
      // watch round, so such a loop cannot outrun the stop.
      if (host->terminating_) lua_sethook(L, Hook, LUA_MASKCOUNT, 1);
    }
    ~Entry() {
      // First: every scope opened inside it has closed (LIFO), this one has not.
      if (host_->call_scope_.handle != nullptr)
        host_->call_scope_closer_(host_->call_scope_ctx_, host_->call_scope_.handle);
      host_->call_scope_ = saved_call_scope_;
      // ... and so does the Lua that called in, once it runs again.
      if (host_->terminating_) lua_sethook(saved_current_, Hook, LUA_MASKCOUNT, 1);
      host_->current_ = saved_current_;
      host_->running_ = saved_running_;
      host_->in_lua_.store(saved_in_lua_, std::memory_order_relaxed);
      host_->memory_.enforce = saved_enforce_;
      --host_->depth_;
      host_->entry_ = saved_entry_;
      if (host_->depth_ == 0 && host_->watch_hook_ != 0) [[unlikely]]
        host_->EndWatch();
      if (opened_) {
        CloseWindow();
      } else if (host_->budget_ && saved_running_ != nullptr) {
        host_->budget_->Sync(saved_running_);  // a kill under way reaches the caller's next instruction
      }
    }
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;

   private:
    void OpenWindow();
    void CloseWindow();

    LuaHost* host_;
    lua_State* saved_current_;
    lua_State* saved_running_;
    bool saved_enforce_;
    bool saved_in_lua_;
    uint64_t saved_entry_;
    CallScope saved_call_scope_;
    CpuBudget::Window outer_;  // restored on exit (only the outermost entry opens one)
    bool opened_ = false;
  };

  // RAII: host C++ code runs (e.g. JS called from Lua): the limit is not
  // enforced and `current` is the calling thread. Counts as busy().
  class HostSection {
   public:
    // It leaves in_lua_ as it is: host code called from Lua still counts as
    // running Lua for the InterruptWatch. Once the thread is torn down, a JS
    // function Lua calls fails at once, and a loop of pcall(jsFunction) spends
    // nearly all its time here: with host code not counted, the watch never
    // saw it in Lua twice in a row and terminate() waited for ever. The hook
    // an interrupt sets on the calling thread fires when the host code returns.
    HostSection(LuaHost* host, lua_State* L)
        : host_(host), saved_current_(host->current_), saved_enforce_(host->memory_.enforce) {
      if (host->entry_hook_ != nullptr) [[unlikely]]
        host->RunEntryHook();
      host->current_ = L;
      host->memory_.enforce = false;
      ++host->sections_;
    }
    ~HostSection() {
      host_->current_ = saved_current_;
      host_->memory_.enforce = saved_enforce_;
      --host_->sections_;
    }
    HostSection(const HostSection&) = delete;
    HostSection& operator=(const HostSection&) = delete;

   private:
    LuaHost* host_;
    lua_State* saved_current_;
    bool saved_enforce_;
  };

  class BatchEntry;
  // RAII: host code that resumes tasks one after another (the scheduler's
  // batches of wakes), on a host without a CPU budget. It is a HostSection
  // for the host code between the runs, and holds what an Entry would save
  // and restore around each run but which does not change between them, so
  // each run opens a BatchEntry that switches only the per-run fields: half
  // the bookkeeping of an Entry and a HostSection per wake. Between runs the
  // host is as it would be between two Entries (depth, entry id, call scope
  // and interrupt state the caller's), except that a watch's count hook
  // stays until the batch ends, as for one long outermost Entry.
  class Batch {
   public:
    Batch(LuaHost* host, lua_State* L)
        : host_(host),
          saved_current_(host->current_),
          saved_running_(host->running_),
          saved_enforce_(host->memory_.enforce),
          saved_in_lua_(host->in_lua_.load(std::memory_order_relaxed)),
          saved_entry_(host->entry_),
          saved_call_scope_(host->call_scope_),
          L_(L),
          stack_base_(StackPoint()) {
      if (host->entry_hook_ != nullptr) [[unlikely]]
        host->RunEntryHook();
      host->current_ = L;
      host->memory_.enforce = false;
      ++host->sections_;
    }
    ~Batch() {
      if (host_->terminating_) lua_sethook(saved_current_, Hook, LUA_MASKCOUNT, 1);
      if (host_->depth_ == 0 && host_->watch_hook_ != 0) [[unlikely]]
        host_->EndWatch();
      host_->current_ = saved_current_;
      host_->memory_.enforce = saved_enforce_;
      --host_->sections_;
    }
    Batch(const Batch&) = delete;
    Batch& operator=(const Batch&) = delete;

   private:
    friend class LuaHost::BatchEntry;
    LuaHost* host_;
    lua_State* saved_current_;
    lua_State* saved_running_;
    bool saved_enforce_;
    bool saved_in_lua_;
    uint64_t saved_entry_;
    CallScope saved_call_scope_;
    lua_State* L_;          // current() between runs
    uintptr_t stack_base_;  // for a run that is the outermost entry
  };

  // RAII: one run inside a Batch; to the Lua it runs, the same as an Entry.
  // Safe around lua_resume. Requires budget() == nullptr.
  class BatchEntry {
   public:
    BatchEntry(const Batch& batch, lua_State* L) : batch_(batch) {
      LuaHost* host = batch.host_;
      if (host->entry_hook_ != nullptr) [[unlikely]]
        host->RunEntryHook();
      host->call_scope_ = {nullptr, 0, host->sections_};
      host->current_ = L;
      host->running_ = L;
      host->in_lua_.store(true, std::memory_order_relaxed);
      host->memory_.enforce = true;
      if (host->depth_++ == 0) host->stack_base_ = batch.stack_base_;
      host->entry_ = ++host->entries_;
      if (host->terminating_) lua_sethook(L, Hook, LUA_MASKCOUNT, 1);
    }
    ~BatchEntry() {
      LuaHost* host = batch_.host_;
      if (host->call_scope_.handle != nullptr)
        host->call_scope_closer_(host->call_scope_ctx_, host->call_scope_.handle);
      host->call_scope_ = batch_.saved_call_scope_;
      host->current_ = batch_.L_;
      host->running_ = batch_.saved_running_;
      host->in_lua_.store(batch_.saved_in_lua_, std::memory_order_relaxed);
      host->memory_.enforce = false;
      --host->depth_;
      host->entry_ = batch_.saved_entry_;
    }
    BatchEntry(const BatchEntry&) = delete;
    BatchEntry& operator=(const BatchEntry&) = delete;

   private:
    const Batch& batch_;
  };

  static constexpr uintptr_t kTaskMark = 1;
  static constexpr uintptr_t kKilledMark = 2;
  static constexpr uintptr_t kPartMark = 4;
  static constexpr uintptr_t kParkedMark = 8;
  static constexpr uintptr_t kMarks = kTaskMark | kKilledMark | kPartMark | kParkedMark;  // a LuaHost is aligned to 16

  // Lua code (an Entry) or host code working on the state (a HostSection) is
  // on the C stack: the state must not be freed now (a close() asked for by
  // JS that this code called waits for it to return).
  bool busy() const { return depth_ > 0 || sections_ > 0; }

  // Deepest nesting of JS -> Lua entries; deeper calls are refused. Below
  // Lua's own C-call limit (200).
  static constexpr int kMaxDepth = 150;
  // C stack the nested entries may take below the outermost one. A count of
  // levels alone does not bound it: a level's frames differ by build (an
  // AddressSanitizer build's are several times larger) and by what the JS in
  // between does. Well under V8's own stack limit (about 1 MB from where the
  // isolate started), so this refusal, not V8's, is what a caller sees.
  static constexpr std::size_t kMaxStackBytes = 512 * 1024;

  // The nesting is too deep to enter Lua again from here.
  bool too_deep() const { return depth_ >= kMaxDepth || (depth_ > 0 && stack_base_ - StackPoint() > kMaxStackBytes); }

  // Runs f(L) with a light userdata `ud` as its only argument in protected
  // mode, under an Entry. Returns the Lua status (error message on failure in
  // *error).
  int Protected(lua_CFunction f, void* ud, std::string* error);

  // The message for a memory error, naming the limit when it caused it.
  std::string MemoryErrorMessage() const;

 private:
  LuaHost() = default;
  // Where this frame is on the C stack (which grows down on every target we build for).
  [[gnu::always_inline]] static uintptr_t StackPoint() {
    return reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  }
  void DrainUnrefs();
  [[gnu::noinline]] void RunEntryHook();
  static void OnLargeAlloc(void* host);
  static int l_traceback(lua_State* L);
  void SaveError(lua_State* L) noexcept;
  void OnHook(lua_State* L);
  void EndWatch();

  MemoryBudget memory_;  // must outlive L_: it is the allocator's state
  bool closing_ = false;
  std::unique_ptr<CpuBudget> budget_;  // null without timeSlice/taskTimeout
  const Clock* clock_ = nullptr;       // borrowed: the embedder's, outlives the host
  bool last_killed_ = false;
  lua_State* L_ = nullptr;        // owned; closed in the destructor
  lua_State* current_ = nullptr;  // borrowed: a thread of L_
  lua_State* running_ = nullptr;  // borrowed: see running()
  int depth_ = 0;
  uintptr_t stack_base_ = 0;  // StackPoint() when the outermost Entry opened
  uint64_t entries_ = 0;      // Entries made so far: the last one's id
  uint64_t entry_ = 0;        // entry_id()
  int sections_ = 0;          // live HostSections
  CallScope call_scope_;      // the innermost Entry's; the Entries below keep theirs
  CallScopeCloser call_scope_closer_ = nullptr;
  void* call_scope_ctx_ = nullptr;
  // An Entry is open (see HostSection for why host code counts). A relaxed atomic:
  // written by the Lua thread (plain stores), read by the InterruptWatch.
  std::atomic<bool> in_lua_{false};
  std::shared_ptr<InterruptWatch> watch_;  // null unless interruptible
  InterruptPoll poll_ = nullptr;
  void* poll_ctx_ = nullptr;
  volatile std::sig_atomic_t interrupt_pending_ = 0;  // set by the signal handler
  volatile std::sig_atomic_t watch_hook_ = 0;  // the signal handler hooked a thread in the current outermost entry
  bool terminating_ = false;
  std::string message_;
  std::string traceback_;
  std::vector<int> deferred_unrefs_;
  EntryHook entry_hook_ = nullptr;  // see set_entry_hook
  void* entry_hook_ctx_ = nullptr;
};

}  // namespace lua_tasks
