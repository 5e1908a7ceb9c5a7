// SPDX-License-Identifier: MIT
// LuaHost: one Lua state, its allocator, its libraries, and protected entry.
#include "core/host/lua_host.hpp"

#include <cstring>
#include <utility>

#include "core/api/lua_api_bounded.hpp"
#include "core/host/lua_coroutine.hpp"
#include "core/limits/interrupt_watch.hpp"
#include "lua/guarded_xpcall.lua.hpp"

namespace lua_tasks {

namespace {

struct SetupArgs {
  const LuaHostOptions* options;
};

// Runs in protected mode: every error here becomes a status for Create.
// killing() -> whether the running code is being stopped: killed by the CPU
// budget, or stopped because its thread shuts down.
int l_budget_killing(lua_State* L) {
  LuaHost* host = LuaHost::From(L);
  const CpuBudget* budget = host->budget();
  lua_pushboolean(L, host->terminating() || (budget != nullptr && budget->killing()));
  return 1;
}

// Every runtime's xpcall passes its message handler over while Lua is being
// stopped (lua/guarded_xpcall.lua says why).
int l_setup(lua_State* L) {
  auto* args = static_cast<SetupArgs*>(lua_touserdata(L, 1));
  OpenLibs(L, args->options->libs);
  ReplaceCoroutineClose(L);
  if (args->options->install_apis != nullptr) args->options->install_apis(L);
  lua_getglobal(L, "xpcall");
  if (lua_isfunction(L, -1)) {
    if (luaL_loadbufferx(L, kGuardedXpcallLua, sizeof(kGuardedXpcallLua) - 1, kGuardedXpcallLuaName, "t") != LUA_OK)
      lua_error(L);
    lua_insert(L, -2);
    lua_pushcfunction(L, l_budget_killing);
    lua_getglobal(L, "type");
    lua_getglobal(L, "select");
    lua_getglobal(L, "error");
    lua_call(L, 5, 0);
  }
  return 0;
}

}  // namespace

std::unique_ptr<LuaHost> LuaHost::Create(const LuaHostOptions& options, std::string* error) {
  std::unique_ptr<LuaHost> host(new LuaHost());
  host->memory_.limit = options.memory_limit;
  host->clock_ = options.clock;
  if ((options.time_slice_ns > 0 || options.task_timeout_ns > 0) && options.clock != nullptr) {
    host->budget_ = std::make_unique<CpuBudget>(options.clock, options.time_slice_ns, options.task_timeout_ns,
                                                &host->memory_.big_strings);
    host->memory_.on_large = &LuaHost::OnLargeAlloc;
    host->memory_.on_large_ctx = host.get();
  }
  lua_State* L = lua_newstate(MemoryBudget::Alloc, &host->memory_);
  if (L == nullptr) {
    *error = "cannot create a Lua state: out of memory";
    return nullptr;
  }
  host->L_ = L;
  host->current_ = L;
  *static_cast<LuaHost**>(lua_getextraspace(L)) = host.get();
  lua_gc(L, LUA_GCGEN, 0, 0);  // generational GC: most task garbage dies young

  SetupArgs args{&options};
  lua_pushcfunction(L, l_setup);
  lua_pushlightuserdata(L, &args);
  const bool enforce = host->memory_.enforce;
  host->memory_.enforce = true;
  const int status = lua_pcall(L, 1, 0, 0);
  host->memory_.enforce = enforce;
  if (status != LUA_OK) {
    *error = status == LUA_ERRMEM ? host->MemoryErrorMessage() : lua_tostring(L, -1);
    return nullptr;
  }
  // Slot 1 of the main thread holds the traceback handler for good: calls
  // made from the top level use it in place instead of moving it per call.
  lua_settop(L, 0);
  lua_pushcfunction(L, l_traceback);
  if (host->budget_) host->budget_->Install(L);  // every later thread inherits it
  if (options.interruptible) {
    host->watch_ = InterruptWatch::ForThisThread();
    host->watch_->Add(host.get());
  }
  return host;
}

LuaHost::~LuaHost() {
  // Still watched while lua_close runs finalizers and <close> handlers: a
  // thread torn down while one loops is stopped too.
  if (L_ != nullptr) lua_close(L_);
  if (watch_) watch_->Remove(this);
}

void LuaHost::RequestInterrupt() noexcept {
  interrupt_pending_ = 1;
  watch_hook_ = 1;
  // The innermost thread running Lua (coroutine.resume keeps running()), or
  // the one host code was entered on.
  lua_State* L = running_ != nullptr ? running_ : current_;
  // A count hook already on it (the CPU budget's, every CpuBudget::kHookEvery
  // instructions or fewer, or the watch's from an earlier round) sees the flag.
  // Setting it again would walk L's whole call stack: lua_sethook marks every
  // frame. 200,000 frames deep (a stack overflow on its way), under load, one
  // walk took longer than the watch's period, so the thread did nothing else.
  if ((lua_gethookmask(L) & LUA_MASKCOUNT) == 0) lua_sethook(L, Hook, LUA_MASKCOUNT, kWatchEvery);
}

void LuaHost::Hook(lua_State* L, lua_Debug* ar) {
  From(L)->OnHook(L);
}

void LuaHost::OnHook(lua_State* L) {
  if ((interrupt_pending_ != 0 || terminating_) && InterruptDue()) RaiseTerminating(L);
  if (budget_) {
    budget_->OnHook(L);
  } else if (watch_hook_ == 0) {
    lua_sethook(L, nullptr, 0, 0);  // the watch's hook, left on a thread after its entry ended
  }
}

void LuaHost::EndWatch() {
  watch_hook_ = 0;
  // Its other threads drop the hook at their next count (OnHook).
  if (!budget_ && !terminating_) lua_sethook(L_, nullptr, 0, 0);
}

bool LuaHost::InterruptDue() {
  if (terminating_) return true;
  if (interrupt_pending_ == 0) return false;
  interrupt_pending_ = 0;
  if (poll_ != nullptr && poll_(poll_ctx_)) terminating_ = true;
  return terminating_;
}

int LuaHost::RaiseTerminating(lua_State* L) {
  lua_sethook(L, Hook, LUA_MASKCOUNT, 1);  // every instruction from now on
  if (L != L_) SetKilledMark(L);           // its <close> handlers are not run later
  return luaL_error(L,
                    "Lua was stopped: the thread it runs on is shutting down (worker.terminate() or process.exit())");
}

int LuaHost::Load(lua_State* L, std::string_view source, const char* chunkname) {
  return LoadText(L, source.data(), source.size(), chunkname, "t", false);
}

void LuaHost::OnLargeAlloc(void* ctx) {
  auto* host = static_cast<LuaHost*>(ctx);
  if (host->budget_ && host->running_ != nullptr) host->budget_->Charge(host->running_);
}

int LuaHost::l_traceback(lua_State* L) {
  // Stack: [err]. Returns err unchanged; records its message and traceback.
  // It runs in Lua's protected message-handler slot, so raising here (even a
  // memory error) only turns the status into LUA_ERRERR.
  if (!luaL_callmeta(L, 1, "__tostring") || lua_type(L, -1) != LUA_TSTRING) {
    lua_settop(L, 1);
    const int t = lua_type(L, 1);
    if (t == LUA_TSTRING || t == LUA_TNUMBER) {
      luaL_tolstring(L, 1, nullptr);
    } else {
      lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
  }
  luaL_traceback(L, L, nullptr, 1);
  From(L)->SaveError(L);
  lua_settop(L, 1);
  return 1;
}

void LuaHost::SaveError(lua_State* L) noexcept {
  // Stack: [err, message, traceback].
  try {
    size_t n;
    const char* s = lua_tolstring(L, 2, &n);
    message_.assign(s, n);
    s = lua_tolstring(L, 3, &n);
    traceback_.assign(s, n);
  } catch (...) {
    message_.clear();
    traceback_.clear();
  }
}

int LuaHost::PCall(lua_State* L, int nargs, int nresults) {
  if (!deferred_unrefs_.empty()) DrainUnrefs();
  memory_.refused = false;
  // From the top level of the main thread (depth 1: only our own Entry),
  // stack indices are absolute and slot 1 is the handler.
  if (L == L_ && depth_ == 1) {
    const int status = lua_pcall(L, nargs, nresults, 1);
    if (status != LUA_OK && status != LUA_ERRRUN) {
      message_.clear();
      traceback_.clear();
    }
    return status;
  }
  const int base = lua_gettop(L) - nargs;  // the function's slot
  lua_pushcfunction(L, l_traceback);
  lua_insert(L, base);
  const int status = lua_pcall(L, nargs, nresults, base);
  lua_remove(L, base);
  if (status != LUA_OK && status != LUA_ERRRUN) {
    message_.clear();  // the handler did not run: nothing recorded for this error
    traceback_.clear();
  }
  return status;
}

void LuaHost::RunEntryHook() {
  const EntryHook fn = std::exchange(entry_hook_, nullptr);
  fn(std::exchange(entry_hook_ctx_, nullptr));
}

void LuaHost::DrainUnrefs() {
  for (int ref : deferred_unrefs_) luaL_unref(L_, LUA_REGISTRYINDEX, ref);
  deferred_unrefs_.clear();
}

int LuaHost::Protected(lua_CFunction f, void* ud, std::string* error) {
  lua_State* L = L_;
  lua_pushcfunction(L, f);
  lua_pushlightuserdata(L, ud);
  int status;
  {
    Entry entry(this, L);
    status = PCall(L, 1, 0);
  }
  if (status != LUA_OK) {
    *error = status == LUA_ERRMEM ? MemoryErrorMessage() : message_.empty() ? "error" : message_;
    lua_pop(L, 1);
  }
  return status;
}

std::string LuaHost::MemoryErrorMessage() const {
  if (memory_.refused && memory_.limit != 0) {
    return "Lua memory limit exceeded: an allocation of " + std::to_string(memory_.refused_size) + " bytes with " +
           std::to_string(memory_.refused_used) + " in use passes memoryLimit " + std::to_string(memory_.limit);
  }
  return "Lua ran out of memory";
}

void LuaHost::Entry::OpenWindow() {
  outer_ = host_->budget_->Open(0, false);
  opened_ = true;
  host_->last_killed_ = false;
}

void LuaHost::Entry::CloseWindow() {
  bool killed;
  host_->budget_->Close(outer_, &killed);
  host_->last_killed_ = killed;
  if (killed) host_->budget_->Install(host_->L_);  // the kill left a per-instruction hook
}

}  // namespace lua_tasks
