// SPDX-License-Identifier: MIT
// WorkMeter: how a long C function counts its work and asks whether to stop.
#pragma once

#include <cstddef>

#include <lua.hpp>

#include "core/host/lua_host.hpp"

namespace lua_tasks {

// A C function that Lua can make run long (string.rep, table.sort, load ...)
// runs whole between two VM instructions, where the CPU budget's count hook
// cannot reach. So it counts its work in units of about a nanosecond and,
// every kCheckEvery units, asks LuaHost::StopDue, the one stop check; when
// that says stop, it raises LuaHost::RaiseStop. Trivially destructible, so
// it may live in a lua_CFunction frame that raises:
//
//   WorkMeter meter(L);
//   for (...) { ...; if (meter.Add(n)) return LuaHost::RaiseStop(L); }
//   meter.Done(L);
class WorkMeter {
 public:
  static constexpr size_t kCheckEvery = size_t{1} << 16;  // about 65 us of work
  // One table read or write, call or compare: each may run a chain of
  // __index tables 2000 long (Lua's limit; about 17 us here), so the check
  // comes every 256 of them, about 5 us apart in the common case.
  static constexpr size_t kPerStep = kCheckEvery / 256;

  explicit WorkMeter(lua_State* L) : host_(LuaHost::From(L)) {}

  // Counts `units` of work; true when the caller must stop (and raise).
  bool Add(size_t units) {
    if (units < left_) {
      left_ -= units;
      return false;
    }
    left_ = kCheckEvery;
    ++checks_;
    return host_->StopDue();
  }
  // At a normal return. A call that ran past a check charges its thread
  // (LuaHost::Charge): the next instruction reads the clock, so a loop of
  // such calls is measured call by call.
  void Done(lua_State* L) const {
    if (checks_ != 0) host_->Charge(L);
  }

 private:
  LuaHost* host_;
  size_t left_ = kCheckEvery;
  unsigned checks_ = 0;
};

}  // namespace lua_tasks
