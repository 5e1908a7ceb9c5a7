// SPDX-License-Identifier: MIT
// LuaRuntime: a runtime's Lua side, assembled in order: host, scheduler, tasks API.
#include "lua_runtime.hpp"

#include "lua_api.hpp"

namespace lua_tasks {

bool LuaRuntime::Assemble(const LuaHostOptions& options, const Clock* clock, SchedulerHooks* hooks,
                          std::string* error) {
  Free();
  host = LuaHost::Create(options, error);
  if (!host) return false;
  scheduler = std::make_unique<Scheduler>(host.get(), clock, hooks);
  if (host->Protected(
          [](lua_State* L) {
            auto* self = static_cast<LuaRuntime*>(lua_touserdata(L, 1));
            RegisterLuaApi(L, self->scheduler.get(), &self->keyed);
            return 0;
          },
          this, error) != LUA_OK) {
    Free();
    return false;
  }
  return true;
}

}  // namespace lua_tasks
