// SPDX-License-Identifier: MIT
// Tests for LuaHost: library profiles, protected calls, tracebacks, the memory limit, the call scope.
#include "core/host/lua_host.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_clocks.hpp"
#include "test_hosts.hpp"

namespace lua_tasks {
namespace {

std::unique_ptr<LuaHost> MakeHost(LibProfile::Kind kind = LibProfile::Kind::kSafe, size_t limit = 0) {
  LuaHostOptions o;
  o.libs.kind = kind;
  o.memory_limit = limit;
  return CreateHost(o);
}

TEST(LuaHost, SafeProfileHasOnlyTheAllowList) {
  auto host = MakeHost();
  const std::pair<const char*, const char*> rows[] = {
      {"return type(string)", "ok:table"},     {"return type(table)", "ok:table"},
      {"return type(math)", "ok:table"},       {"return type(utf8)", "ok:table"},
      {"return type(coroutine)", "ok:table"},  {"return type(io)", "ok:nil"},
      {"return type(debug)", "ok:nil"},        {"return type(package)", "ok:nil"},
      {"return type(require)", "ok:nil"},      {"return type(dofile)", "ok:nil"},
      {"return type(loadfile)", "ok:nil"},     {"return type(os.execute)", "ok:nil"},
      {"return type(os.exit)", "ok:nil"},      {"return type(os.getenv)", "ok:nil"},
      {"return type(os.time)", "ok:function"}, {"return type(os.clock)", "ok:function"},
      {"return type(os.date)", "ok:function"}, {"return type(os.difftime)", "ok:function"},
  };
  for (const auto& [src, want] : rows) EXPECT_EQ(RunLua(host.get(), src), want) << src;
}

TEST(LuaHost, AllProfileOpensEveryLibrary) {
  auto host = MakeHost(LibProfile::Kind::kAll);
  EXPECT_EQ(RunLua(host.get(), "return type(io) .. type(debug) .. type(os.getenv) .. type(require)"),
            "ok:tabletablefunctionfunction");
}

TEST(LuaHost, BinaryChunksAreRefusedInEveryProfile) {
  for (auto kind : {LibProfile::Kind::kSafe, LibProfile::Kind::kAll}) {
    auto host = MakeHost(kind);
    EXPECT_EQ(RunLua(host.get(), "return select(2, load(string.dump(function() end)))"),
              "ok:attempt to load a binary chunk (mode is 't')");
    EXPECT_EQ(RunLua(host.get(), "return (pcall(load, 'return 1', 'x', 'b'))"), "ok:false");
    lua_State* L = host->main();
    const std::string dumped("\x1bLua\x54", 5);
    EXPECT_NE(host->Load(L, dumped, "=bin"), LUA_OK);
    lua_pop(L, 1);
  }
}

TEST(LuaHost, RuntimeErrorsRecordMessageAndTraceback) {
  auto host = MakeHost();
  EXPECT_EQ(RunLua(host.get(), "local function f() error('boom') end f()"), "err:test:1: boom");
  EXPECT_NE(host->last_traceback().find("stack traceback:"), std::string::npos);
  EXPECT_NE(host->last_traceback().find("in local 'f'"), std::string::npos);
  EXPECT_EQ(RunLua(host.get(), "error({})"), "err:(error object is a table value)");
  EXPECT_EQ(RunLua(host.get(), "error(setmetatable({}, {__tostring = function() return 'custom' end}))"), "err:custom");
  EXPECT_EQ(RunLua(host.get(), "error(42)"), "err:42");
}

TEST(LuaHost, MemoryLimitFailsTheAllocationAndTheStateStaysUsable) {
  auto host = MakeHost(LibProfile::Kind::kSafe, 1 << 20);
  const std::string r = RunLua(host.get(), "local t = {} for i = 1, 1e7 do t[i] = i end return #t");
  EXPECT_EQ(r.rfind("mem:Lua memory limit exceeded", 0), 0u) << r;
  EXPECT_LE(host->memory().used, size_t{1} << 20);
  EXPECT_EQ(RunLua(host.get(), "return 1 + 1"), "ok:2");
  EXPECT_GT(host->memory().peak, size_t{512} << 10);
}

// The kill is raised from the count hook, after which Lua runs no hooks in
// that coroutine: the mark keeps its <close> handlers from being run later.
// The main thread is never marked (new coroutines copy its extra space).
TEST(LuaHost, AKillMarksTheCoroutineItWasRaisedInButNotTheMainThread) {
  TickingClock clock;
  LuaHostOptions o;
  o.task_timeout_ns = 50'000'000;
  o.clock = &clock;
  std::string error;
  auto host = LuaHost::Create(o, &error);
  ASSERT_TRUE(host) << error;
  EXPECT_EQ(RunLua(host.get(), "co = coroutine.create(function() while true do end end) return coroutine.resume(co)"),
            "ok:false");  // the kill, returned by coroutine.resume
  EXPECT_TRUE(host->last_killed());
  lua_State* L = host->main();
  lua_getglobal(L, "co");
  EXPECT_TRUE(LuaHost::HasKilledMark(lua_tothread(L, -1)));
  EXPECT_FALSE(LuaHost::HasKilledMark(L));
  EXPECT_EQ(LuaHost::From(lua_tothread(L, -1)), host.get());
  lua_pop(L, 1);
  EXPECT_EQ(RunLua(host.get(), "co2 = coroutine.create(print) return 1"), "ok:1");
  lua_getglobal(L, "co2");
  EXPECT_FALSE(LuaHost::HasKilledMark(lua_tothread(L, -1)));
  lua_pop(L, 1);
}

TEST(LuaHost, StatesAreIsolated) {
  auto a = MakeHost();
  auto b = MakeHost();
  RunLua(a.get(), "shared = 1; getmetatable('').__index = nil");
  EXPECT_EQ(RunLua(b.get(), "return tostring(shared)"), "ok:nil");
  EXPECT_EQ(RunLua(b.get(), "return ('x'):upper()"), "ok:X");
}

// An embedder's calls out of Lua, as the addon makes them: a C function
// (global `out`) that records whether it may use the entry's CallScope and
// opens one there ("scope 1", "scope 2", ...), and a closer that records
// what it closes.
}  // namespace
}  // namespace lua_tasks

namespace lua_tasks {
namespace {

// Regression: the text-only load wrapper passed an explicit nil env whenever
// it was called with fewer than four arguments, so loaded chunks saw no globals.
TEST(LuaHost, LoadWithoutEnvSeesTheGlobals) {
  auto host = MakeHost();
  EXPECT_EQ(RunLua(host.get(), "return load('return type(print)', 'x', 't')()"), "ok:function");
  EXPECT_EQ(RunLua(host.get(), "return load('return type(print)')()"), "ok:function");
  EXPECT_EQ(RunLua(host.get(), "return load('return x', 'c', 't', { x = 'env' })()"), "ok:env");
  EXPECT_EQ(RunLua(host.get(), "return select(2, pcall(load('return print', 'c', 't', nil)))"),
            "ok:[string \"c\"]:1: attempt to index a nil value (upvalue '_ENV')");
}

// An embedder's calls out of Lua, as the addon makes them: a C function
// (global `out`) that records whether it may use the entry's CallScope and
// opens one there ("scope 1", "scope 2", ...), and a closer that records
// what it closes.
}  // namespace
}  // namespace lua_tasks

namespace lua_tasks {
namespace {

// The hook a sliced codec job leaves: it runs once, before the next Entry or
// HostSection opens, and the sections it opens itself do not run it again.
struct HookCount {
  LuaHost* host = nullptr;
  int runs = 0;
  int depth_seen = -1;
  bool busy_seen = true;
  static void Run(void* ctx) {
    auto* c = static_cast<HookCount*>(ctx);
    ++c->runs;
    c->depth_seen = c->host->depth();
    c->busy_seen = c->host->busy();
    LuaHost::HostSection section(c->host, c->host->main());  // as a codec job's step does
  }
};

TEST(LuaHost, TheEntryHookRunsOnceBeforeTheNextSectionOrEntry) {
  auto host = MakeHost();
  HookCount count{host.get()};
  host->set_entry_hook(&HookCount::Run, &count);
  EXPECT_TRUE(host->has_entry_hook());
  {
    LuaHost::HostSection section(host.get(), host->main());
    EXPECT_EQ(count.runs, 1);
    EXPECT_FALSE(count.busy_seen);  // before this section counted
    EXPECT_FALSE(host->has_entry_hook());
  }
  { LuaHost::HostSection again(host.get(), host->main()); }
  EXPECT_EQ(count.runs, 1);

  host->set_entry_hook(&HookCount::Run, &count);
  EXPECT_EQ(RunLua(host.get(), "return 1 + 1"), "ok:2");  // an Entry, as a call from JS opens
  EXPECT_EQ(count.runs, 2);
  EXPECT_EQ(count.depth_seen, 0);

  host->set_entry_hook(&HookCount::Run, &count);
  host->set_entry_hook(nullptr, nullptr);
  EXPECT_EQ(RunLua(host.get(), "return 3"), "ok:3");
  EXPECT_EQ(count.runs, 2);
}

// An embedder's calls out of Lua, as the addon makes them: a C function
// (global `out`) that records whether it may use the entry's CallScope and
// opens one there ("scope 1", "scope 2", ...), and a closer that records
// what it closes.
struct CallOut {
  LuaHost* host;
  std::vector<std::string> seen;    // per call: "direct <handle>" or "own"
  std::vector<std::string> closed;  // handles, in closing order
  std::vector<std::string> names;   // the handles given out: stable addresses
  int opened = 0;

  static int l_out(lua_State* L) {
    auto* c = static_cast<CallOut*>(lua_touserdata(L, lua_upvalueindex(1)));
    LuaHost::CallScope* s = c->host->DirectCallScope();
    if (s == nullptr) {
      c->seen.push_back("own");
      return 0;
    }
    if (s->handle == nullptr && LuaHost::MayMoveCallScope(L)) {
      c->names.push_back("scope " + std::to_string(++c->opened));
      s->handle = &c->names.back();
    }
    c->seen.push_back(s->handle == nullptr ? "direct none" : "direct " + *static_cast<std::string*>(s->handle));
    return 0;
  }
  static void Close(void* ctx, void* handle) {
    static_cast<CallOut*>(ctx)->closed.push_back(*static_cast<std::string*>(handle));
  }
  void Install() {
    names.reserve(16);
    host->set_call_scope_closer(&CallOut::Close, this);
    lua_pushlightuserdata(host->main(), this);
    lua_pushcclosure(host->main(), &CallOut::l_out, 1);
    lua_setglobal(host->main(), "out");
  }
};

TEST(LuaHost, AnEntrysOwnCallsShareItsCallScopeAndTheEntryClosesIt) {
  auto host = MakeHost(LibProfile::Kind::kAll);
  CallOut c{host.get()};
  c.Install();
  EXPECT_EQ(host->DirectCallScope(), nullptr);  // no entry
  EXPECT_EQ(RunLua(host.get(), "out() out() return 1"), "ok:1");
  EXPECT_EQ(c.seen, (std::vector<std::string>{"direct scope 1", "direct scope 1"}));
  EXPECT_EQ(c.closed, std::vector<std::string>{"scope 1"});
  EXPECT_EQ(RunLua(host.get(), "out() return 2"), "ok:2");  // the next entry opens its own
  EXPECT_EQ(c.closed, (std::vector<std::string>{"scope 1", "scope 2"}));
}

TEST(LuaHost, LuaRunUnderAHostSectionTakesNoCallScope) {
  auto host = MakeHost(LibProfile::Kind::kAll);
  CallOut c{host.get()};
  c.Install();
  lua_State* L = host->main();
  ASSERT_EQ(host->Load(L, "out()", "=test"), LUA_OK);
  {
    LuaHost::Entry entry(host.get(), L);
    LuaHost::HostSection section(host.get(), L);  // host code that runs Lua, as a getter's conversion does
    lua_call(L, 0, 0);
  }
  EXPECT_EQ(c.seen, std::vector<std::string>{"own"});
  EXPECT_TRUE(c.closed.empty());
}

TEST(LuaHost, ANestedEntryClosesItsOwnCallScopeAndTheOuterKeepsItsOwn) {
  auto host = MakeHost(LibProfile::Kind::kAll);
  CallOut c{host.get()};
  c.Install();
  lua_State* L = host->main();
  // nested(): a call from Lua into the host that enters Lua again, as JS calling a Lua function does.
  lua_pushlightuserdata(L, host.get());
  lua_pushcclosure(
      L,
      [](lua_State* from) {
        auto* h = static_cast<LuaHost*>(lua_touserdata(from, lua_upvalueindex(1)));
        LuaHost::HostSection section(h, from);
        luaL_loadstring(from, "out() out()");
        LuaHost::Entry entry(h, from);
        lua_call(from, 0, 0);
        return 0;
      },
      1);
  lua_setglobal(L, "nested");
  EXPECT_EQ(RunLua(host.get(), "out() nested() out() return 0"), "ok:0");
  EXPECT_EQ(c.seen, (std::vector<std::string>{"direct scope 1", "direct scope 2", "direct scope 2", "direct scope 1"}));
  EXPECT_EQ(c.closed, (std::vector<std::string>{"scope 2", "scope 1"}));
}

TEST(LuaHost, TheCallScopeIsNeverOpenedInsideAFinalizerNorWithTheCollectorStopped) {
  auto host = MakeHost(LibProfile::Kind::kAll);
  CallOut c{host.get()};
  c.Install();
  EXPECT_EQ(RunLua(host.get(), "setmetatable({}, {__gc = function() out() end}) collectgarbage() return 0"), "ok:0");
  EXPECT_EQ(c.seen, std::vector<std::string>{"direct none"});  // the finalizer's call: no scope opened for it
  EXPECT_EQ(RunLua(host.get(), "collectgarbage('stop') out() collectgarbage('restart') out() return 0"), "ok:0");
  EXPECT_EQ(c.seen, (std::vector<std::string>{"direct none", "direct none", "direct scope 1"}));
  EXPECT_EQ(c.closed, std::vector<std::string>{"scope 1"});
}

}  // namespace
}  // namespace lua_tasks
