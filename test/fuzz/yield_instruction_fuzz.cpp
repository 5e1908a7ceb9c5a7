// SPDX-License-Identifier: MIT
// Fuzz target: the yield instruction parser on arbitrary yield arguments must never crash or misparse.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/scheduling/yield_instruction.hpp"

using lua_tasks::ParseYieldInstruction;
using lua_tasks::WaitKind;
using lua_tasks::WaitRequest;

namespace {
class FixedClock final : public lua_tasks::Clock {
 public:
  int64_t MonoNs() const override { return 0; }
  int64_t WallNs() const override { return int64_t{1700000000} * 1000000000; }
};
}  // namespace

// Input: up to 4 values, each a tag byte then its payload.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static lua_State* L = luaL_newstate();  // one state across inputs: the fuzzer is single-threaded
  lua_settop(L, 0);
  size_t i = 0;
  int n = 0;
  while (i < size && n < 4) {
    const uint8_t tag = data[i++] % 5;
    switch (tag) {
      case 0:
        lua_pushnil(L);
        break;
      case 1: {  // a string of up to 16 bytes
        size_t len = i < size ? data[i++] % 17 : 0;
        if (len > size - i) len = size - i;
        lua_pushlstring(L, reinterpret_cast<const char*>(data + i), len);
        i += len;
        break;
      }
      case 2: {  // a float
        double d = 0;
        if (size - i >= sizeof d) std::memcpy(&d, data + i, sizeof d);
        i += std::min(size - i, sizeof d);
        lua_pushnumber(L, d);
        break;
      }
      case 3: {  // an integer
        int64_t v = 0;
        if (size - i >= sizeof v) std::memcpy(&v, data + i, sizeof v);
        i += std::min(size - i, sizeof v);
        lua_pushinteger(L, v);
        break;
      }
      default:
        lua_newtable(L);
    }
    ++n;
  }
  WaitRequest req;
  char err[256];
  const FixedClock clock;
  const bool ok = ParseYieldInstruction(L, 1, n, clock, nullptr, &req, err, sizeof err);
  if (ok) {
    // Invariants of an accepted instruction.
    if (req.kind == WaitKind::kFor && (req.duration_ns < 0 || req.duration_ns > lua_tasks::kMaxWaitNs + 1))
      __builtin_trap();
    if (req.kind == WaitKind::kUntilTime && req.wall_ns < 0) __builtin_trap();
  } else if (std::strlen(err) == 0) {
    __builtin_trap();  // a refusal always explains itself
  }
  return 0;
}
