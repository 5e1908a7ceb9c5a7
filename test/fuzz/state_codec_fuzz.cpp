// SPDX-License-Identifier: MIT
// Fuzz target: DecodeState on arbitrary bytes never crashes; what it decodes re-encodes and
// decodes; a decode in slices (a stop at every value) ends the same way; a decode under a
// memory limit it may pass fails cleanly (kNoRoom, the stack as it was).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "core/base/clock.hpp"
#include "core/base/crc32c.hpp"
#include "core/codec/state_codec.hpp"
#include "core/host/lua_host.hpp"

namespace {

// Every reading is past any deadline: a Step stops at every check.
class AlwaysLate final : public lua_tasks::Clock {
 public:
  int64_t MonoNs() const override { return now += 1'000'000; }
  int64_t WallNs() const override { return now; }
  mutable int64_t now = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::unique_ptr<lua_tasks::LuaHost> host = [] {
    std::string error;
    return lua_tasks::LuaHost::Create(lua_tasks::LuaHostOptions{}, &error);
  }();
  lua_State* L = host->main();
  lua_tasks::LuaHost::HostSection section(host.get(), L);
  const int top = lua_gettop(L);
  // Most inputs get a valid header, so the fuzzer spends its time on the
  // body; inputs that start with the magic keep theirs, to reach the header
  // checks too. Half of the others become version 4 with a correct checksum,
  // so the structure behind the checksum is fuzzed as well.
  std::string input;
  const bool own_header = size >= 4 && std::memcmp(data, "LTST", 4) == 0;
  const bool checked = !own_header && size > 0 && (data[0] & 1) != 0;
  if (!own_header) input.assign(checked ? "LTST\x04" : "LTST\x02", 5);
  input.append(reinterpret_cast<const char*>(data) + (checked ? 1 : 0), size - (checked ? 1 : 0));
  if (checked) {
    const uint32_t crc = lua_tasks::Crc32c::Update(0, input);
    for (int i = 0; i < 4; ++i) input += static_cast<char>(crc >> (8 * i));
  }
  std::string error, bytes;
  const bool ok = lua_tasks::DecodeState(L, input, &error);
  const std::string first_error = error;
  if (ok) {
    if (lua_gettop(L) != top + 1) __builtin_trap();
    if (!lua_tasks::EncodeState(L, -1, &bytes, &error)) __builtin_trap();
    lua_settop(L, top);
    if (!lua_tasks::DecodeState(L, bytes, &error)) __builtin_trap();
  } else if (error.empty() || lua_gettop(L) != top) {
    __builtin_trap();
  }
  lua_settop(L, top);
  {
    lua_tasks::StateDecoder sliced(L, input);
    sliced.set_check_interval(1);
    AlwaysLate clock;
    lua_tasks::CodecProgress p;
    while ((p = sliced.Step(&clock, 0)) == lua_tasks::CodecProgress::kMore) {
    }
    if ((p == lua_tasks::CodecProgress::kDone) != ok) __builtin_trap();
    if (!ok && sliced.error() != first_error) __builtin_trap();
    if (lua_gettop(L) != top) __builtin_trap();
  }
  {
    lua_tasks::MemoryBudget& memory = host->memory();
    const size_t saved = memory.limit;
    memory.limit = memory.used + 64 * size;  // tight: many inputs decode past it
    lua_tasks::CodecFailure failure;
    const bool fits = lua_tasks::DecodeState(L, input, &error, &failure, lua_tasks::CodecGuard{.memory = &memory});
    memory.limit = saved;
    if (fits != ok && failure != lua_tasks::CodecFailure::kNoRoom) __builtin_trap();
    if (lua_gettop(L) != top + (fits ? 1 : 0)) __builtin_trap();
    lua_settop(L, top);
  }
  if (lua_gc(L, LUA_GCISRUNNING) != 1) __builtin_trap();  // every job gave the collector back
  lua_gc(L, LUA_GCCOLLECT);
  return 0;
}
