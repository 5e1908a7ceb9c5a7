// SPDX-License-Identifier: MIT
// bench_floor: what the Lua library itself costs for the operations a task is made of, driven from C.
//
// Design: the bench's rows for lua-tasks (W2, W3, W8) are set beside these
// in the same run, so each shows how far it sits above what the linked Lua
// library can do at all. Everything here is the bare C API on one state,
// with the collector in the mode a runtime starts in (generational) and, when
// the build has it, the allocator a runtime uses (mimalloc); no scheduler, no
// ids, no queues, no clock reads. Each measure runs once to warm up and once
// timed, and the program prints one JSON line of ns per operation:
//   yield      a lua_resume / coroutine.yield round trip of one coroutine
//   yield10k   the W2 shape: 10,000 coroutines resumed in turn with
//              "SCHEDULER" until each has yielded 100 times and returned;
//              creating and ending them included, per yield
//   spawn      lua_newthread + its function + lua_resume to its end (W8)
//   c_to_lua   lua_pcall of a Lua add(a, b) from C (W3's JS -> Lua)
//   lua_to_c   a Lua loop calling a lua_CFunction add(a, b) (W3's Lua -> JS)
// A wrong count exits 1: a floor that did less work is no floor.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <lua.hpp>

#ifdef LUA_TASKS_HAVE_MIMALLOC
#include <mimalloc.h>
#endif

namespace {

constexpr int kYields = 1'000'000;
constexpr int kTasks = 10'000;
constexpr int kRounds = 100;
constexpr int kSpawns = 100'000;
constexpr int kCalls = 100'000;

// The same worker as W2's, word for word: counts the yields that return
// "SCHEDULER". spin() is the bare round trip.
constexpr const char* kSource = R"(
function worker(n)
  local c = 0
  for i = 1, n do
    if coroutine.yield() == "SCHEDULER" then c = c + 1 end
  end
  return c
end
function spin()
  while true do coroutine.yield() end
end
local c = 0
function spawned() c = c + 1 end
function spawned_count() return c end
function add(a, b) return a + b end
function calls(n)
  local add = cadd local s = 0
  for i = 1, n do s = s + add(i, 1) end
  return s
end
)";

void* Alloc(void* ud, void* ptr, size_t osize, size_t nsize) {
#ifdef LUA_TASKS_HAVE_MIMALLOC
  if (nsize == 0) {
    mi_free(ptr);
    return nullptr;
  }
  return mi_realloc(ptr, nsize);
#else
  if (nsize == 0) {
    std::free(ptr);
    return nullptr;
  }
  return std::realloc(ptr, nsize);
#endif
}

int CAdd(lua_State* L) {
  lua_pushinteger(L, lua_tointeger(L, 1) + lua_tointeger(L, 2));
  return 1;
}

double Ns(std::chrono::steady_clock::time_point since, int ops) {
  const auto d = std::chrono::steady_clock::now() - since;
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()) / ops;
}

[[noreturn]] void Fail(const char* what, long long got, long long want) {
  std::fprintf(stderr, "bench_floor: %s: wrong count %lld, expected %lld\n", what, got, want);
  std::exit(1);
}

// Stack: unchanged.
double Yield(lua_State* L) {
  lua_State* co = lua_newthread(L);
  lua_getglobal(co, "spin");
  int nres = 0;
  lua_resume(co, L, 0, &nres);  // to its first yield
  lua_pop(co, nres);
  const auto t = std::chrono::steady_clock::now();
  for (int i = 0; i < kYields; ++i) {
    lua_resume(co, L, 0, &nres);
    lua_pop(co, nres);
  }
  const double ns = Ns(t, kYields);
  lua_pop(L, 1);
  return ns;
}

// Stack: unchanged (the coroutines live in a table on it meanwhile).
double Yield10k(lua_State* L) {
  const auto t = std::chrono::steady_clock::now();
  lua_createtable(L, kTasks, 0);  // keeps the threads alive, as a runtime's anchors do
  const int anchors = lua_gettop(L);
  std::vector<lua_State*> cos(kTasks);
  for (int i = 0; i < kTasks; ++i) {
    cos[i] = lua_newthread(L);
    lua_rawseti(L, anchors, i + 1);
    lua_getglobal(cos[i], "worker");
    lua_pushinteger(cos[i], kRounds);
  }
  lua_pushliteral(L, "SCHEDULER");
  const int scheduler = lua_gettop(L);
  long long count = 0;
  int live = kTasks;
  for (int round = 0; live > 0; ++round) {
    for (int i = 0; i < kTasks; ++i) {
      lua_State* co = cos[i];
      if (co == nullptr) continue;
      if (round > 0) {
        lua_pushvalue(L, scheduler);
        lua_xmove(L, co, 1);
      }
      int nres = 0;
      const int status = lua_resume(co, L, 1, &nres);  // n, then "SCHEDULER"
      if (status == LUA_OK) {
        count += lua_tointeger(co, -1);
        cos[i] = nullptr;
        --live;
      } else if (status != LUA_YIELD) {
        Fail("yield10k status", status, LUA_YIELD);
      }
      lua_pop(co, nres);
    }
  }
  lua_pop(L, 2);
  const double ns = Ns(t, kTasks * kRounds);
  if (count != kTasks * kRounds) Fail("yield10k", count, kTasks * kRounds);
  return ns;
}

// Stack: unchanged.
double Spawn(lua_State* L) {
  lua_getglobal(L, "spawned");
  const int fn = lua_gettop(L);
  lua_getglobal(L, "spawned_count");
  lua_call(L, 0, 1);
  const lua_Integer before = lua_tointeger(L, -1);
  lua_pop(L, 1);
  const auto t = std::chrono::steady_clock::now();
  for (int i = 0; i < kSpawns; ++i) {
    lua_State* co = lua_newthread(L);
    lua_pushvalue(L, fn);
    lua_xmove(L, co, 1);
    int nres = 0;
    lua_resume(co, L, 0, &nres);
    lua_pop(L, 1);
  }
  const double ns = Ns(t, kSpawns);
  lua_getglobal(L, "spawned_count");
  lua_call(L, 0, 1);
  const lua_Integer got = lua_tointeger(L, -1) - before;
  lua_pop(L, 2);
  if (got != kSpawns) Fail("spawn", got, kSpawns);
  return ns;
}

// Stack: unchanged.
double CToLua(lua_State* L) {
  lua_getglobal(L, "add");
  const int ref = luaL_ref(L, LUA_REGISTRYINDEX);
  long long s = 0;
  const auto t = std::chrono::steady_clock::now();
  for (int i = 0; i < kCalls; ++i) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
    lua_pushinteger(L, i);
    lua_pushinteger(L, 1);
    if (lua_pcall(L, 2, 1, 0) != LUA_OK) Fail("c_to_lua status", 1, 0);
    s += lua_tointeger(L, -1);
    lua_pop(L, 1);
  }
  const double ns = Ns(t, kCalls);
  luaL_unref(L, LUA_REGISTRYINDEX, ref);
  const long long want = static_cast<long long>(kCalls) * (kCalls - 1) / 2 + kCalls;
  if (s != want) Fail("c_to_lua", s, want);
  return ns;
}

// Stack: unchanged.
double LuaToC(lua_State* L) {
  lua_getglobal(L, "calls");
  lua_pushinteger(L, kCalls);
  const auto t = std::chrono::steady_clock::now();
  lua_call(L, 1, 1);
  const double ns = Ns(t, kCalls);
  const long long s = lua_tointeger(L, -1);
  lua_pop(L, 1);
  const long long want = static_cast<long long>(kCalls) * (kCalls + 1) / 2 + kCalls;
  if (s != want) Fail("lua_to_c", s, want);
  return ns;
}

}  // namespace

int main() {
  lua_State* L = lua_newstate(Alloc, nullptr);
  if (L == nullptr) return 1;
  luaL_openlibs(L);
  lua_gc(L, LUA_GCGEN, 0, 0);  // as a runtime starts (lua_host.cpp)
  lua_pushcfunction(L, CAdd);
  lua_setglobal(L, "cadd");
  if (luaL_dostring(L, kSource) != LUA_OK) {
    std::fprintf(stderr, "bench_floor: %s\n", lua_tostring(L, -1));
    return 1;
  }
  double (*const measures[])(lua_State*) = {Yield, Yield10k, Spawn, CToLua, LuaToC};
  double ns[5];
  for (int i = 0; i < 5; ++i) {
    measures[i](L);  // warm-up
    lua_gc(L, LUA_GCCOLLECT);
    ns[i] = measures[i](L);
  }
  std::printf("{\"yield\":%.2f,\"yield10k\":%.2f,\"spawn\":%.2f,\"c_to_lua\":%.2f,\"lua_to_c\":%.2f,\"lua\":\"%s\"}\n",
              ns[0], ns[1], ns[2], ns[3], ns[4], LUA_RELEASE);
  lua_close(L);
  return 0;
}
