// SPDX-License-Identifier: MIT
// LuaRuntime: a runtime's Lua side, assembled in order: host, scheduler, tasks API.
#include "core/host/lua_runtime.hpp"

#include "core/api/lua_api.hpp"
#include "core/api/lua_api_pattern.hpp"

namespace lua_tasks {

bool LuaRuntime::Assemble(const LuaHostOptions& options, const Clock* clock, SchedulerHooks* hooks,
                          std::string* error) {
  Free();
  LuaHostOptions with_apis = options;
  with_apis.install_apis = RegisterPatternApi;  // every runtime's string functions stop when told
  host = LuaHost::Create(with_apis, error);
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
