// SPDX-License-Identifier: MIT
// Fuzz target: our string.find/match/gmatch/gsub give what Lua 5.4's own give, results and errors alike.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include <lua.hpp>

#include "core/api/lua_api_pattern.hpp"

namespace {

// run(S, op, s, p, init, repl): one call on the function set S, as text (no
// pattern function is used to make it: they are what is under test).
constexpr const char kRun[] = R"lua(
local function ser(...)
  local out = {}
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if type(v) == "string" then
      local b = {}
      for j = 1, #v do b[j] = v:byte(j) end
      out[i] = "s" .. table.concat(b, ".")
    else
      out[i] = tostring(v)
    end
  end
  return table.concat(out, ",")
end
local repls = {
  "%0", "%1", "[%2]", "%%", "%", "x",
  {a = "A", b = false, [1] = "one", x = {}},
  function(a, ...) if a == "a" then return false elseif a == "x" then return {} end return a end,
}
return function(S, op, s, p, init, repl)
  if op == 0 then return ser(pcall(S.find, s, p, init)) end
  if op == 1 then return ser(pcall(S.find, s, p, init, true)) end
  if op == 2 then return ser(pcall(S.match, s, p, init)) end
  if op == 3 then
    return ser(pcall(function()
      local out = {}
      for a, b in S.gmatch(s, p, init) do
        out[#out + 1] = ser(a, b)
        if #out > 100 then break end
      end
      return table.concat(out, ";")
    end))
  end
  return ser(pcall(S.gsub, s, p, repls[repl % #repls + 1], init % 5 - 1))
end
)lua";

// Bounds our matcher (stock Lua's has no bound: an input it would spend
// minutes on must not reach it).
struct StepLimit {
  int checks = 0;
  static constexpr int kChecks = 2000;  // two million steps
  static bool ShouldStop(void* ctx) { return ++static_cast<StepLimit*>(ctx)->checks > kChecks; }
  static int Raise(void*, lua_State* L) { return luaL_error(L, "fuzz: step limit"); }
};

struct Harness {
  lua_State* L = nullptr;
  int run_ref = LUA_NOREF;
  int stock_ref = LUA_NOREF;
  int ours_ref = LUA_NOREF;
  StepLimit limit;
};

Harness* Setup() {
  static Harness h;
  if (h.L != nullptr) return &h;
  h.L = luaL_newstate();
  lua_State* L = h.L;
  luaL_openlibs(L);
  if (luaL_loadbuffer(L, kRun, sizeof(kRun) - 1, "=run") != LUA_OK || lua_pcall(L, 0, 1, 0) != LUA_OK) {
    __builtin_trap();
  }
  h.run_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_getglobal(L, "string");
  h.stock_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_newtable(L);
  lua_tasks::RegisterPatternFunctions(L, -1, lua_tasks::PatternStop{StepLimit::ShouldStop, StepLimit::Raise, &h.limit});
  h.ours_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  return &h;
}

std::string Run(Harness* h, int set_ref, int op, std::string_view s, std::string_view p, int init, int repl) {
  lua_State* L = h->L;
  lua_rawgeti(L, LUA_REGISTRYINDEX, h->run_ref);
  lua_rawgeti(L, LUA_REGISTRYINDEX, set_ref);
  lua_pushinteger(L, op);
  lua_pushlstring(L, s.data(), s.size());
  lua_pushlstring(L, p.data(), p.size());
  lua_pushinteger(L, init);
  lua_pushinteger(L, repl);
  if (lua_pcall(L, 6, 1, 0) != LUA_OK) __builtin_trap();
  size_t n;
  const char* out = lua_tolstring(L, -1, &n);
  std::string result(out, n);
  lua_pop(L, 1);
  return result;
}

}  // namespace

// Input: 1 byte operation and replacement, 1 byte init, 1 byte pattern
// length, then the pattern and the subject.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  Harness* h = Setup();
  const int op = data[0] % 5;
  const int repl = data[0] / 5;
  const int init = static_cast<int8_t>(data[1]);
  const std::string_view rest(reinterpret_cast<const char*>(data + 3), size - 3);
  const size_t plen = data[2] < rest.size() ? data[2] : rest.size();
  const std::string_view p = rest.substr(0, plen);
  const std::string_view s = rest.substr(plen);
  h->limit.checks = 0;
  const std::string ours = Run(h, h->ours_ref, op, s, p, init, repl);
  if (h->limit.checks > StepLimit::kChecks) return 0;  // too long for stock Lua
  const std::string stock = Run(h, h->stock_ref, op, s, p, init, repl);
  if (ours != stock) {
    fprintf(stderr, "op %d init %d repl %d\nstock: %s\nours:  %s\n", op, init, repl, stock.c_str(), ours.c_str());
    __builtin_trap();
  }
  lua_gc(h->L, LUA_GCSTEP, 0);
  return 0;
}
