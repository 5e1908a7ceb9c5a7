// SPDX-License-Identifier: MIT
// The Lua API of a runtime: every family over the scheduler, installed in the order they depend on.
#include "core/api/lua_api.hpp"

#include "core/api/lua_api_coroutine.hpp"
#include "core/api/lua_api_durable.hpp"
#include "core/api/lua_api_require.hpp"
#include "core/api/lua_api_resolve.hpp"
#include "core/api/lua_api_store.hpp"
#include "core/api/lua_api_tasks.hpp"
#include "core/api/lua_api_yield.hpp"
#include "core/base/coded_error.hpp"
#include "core/scheduling/scheduler.hpp"

namespace lua_tasks {

void RegisterLuaApi(lua_State* L, Scheduler* scheduler, KeyedStore* store) {
  scheduler->CacheNames(L);
  RegisterCodedError(L);
  RegisterYieldApi(L, scheduler);         // first: the coroutine wrappers capture its coroutine.yield
  RegisterTasksApi(L, scheduler);         // before require, which waits with tasks.sleep
  RegisterStoreApi(L, scheduler, store);  // into the tasks table
  RegisterDurableApi(L, scheduler);       // into the tasks table; wraps the clock and random reads
  RegisterCoroutineApi(L, scheduler);     // the sentinel its pass-through looks for is the scheduler
  RegisterRequireApi(L);
  RegisterResolveApi(L);  // last: it requires modules through require
}

}  // namespace lua_tasks
