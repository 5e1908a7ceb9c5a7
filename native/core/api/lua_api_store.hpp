// SPDX-License-Identifier: MIT
// tasks.store: get, set, delete and keys over the runtime's KeyedStore.
#pragma once

#include <lua.hpp>

namespace lua_tasks {

class KeyedStore;
class Scheduler;

// Longest key, in bytes (keys are 1 to this many bytes of valid UTF-8).
inline constexpr size_t kMaxStoreKeyBytes = 512;
// keys()'s limit when none is given, and the most it takes.
inline constexpr lua_Integer kDefaultKeysLimit = 1000;
inline constexpr lua_Integer kMaxKeysLimit = 100000;

// Sets tasks.store (package.loaded.tasks must exist: install after
// RegisterTasksApi). Its functions hold both addresses: the scheduler says
// whether the runtime has a store, `store` holds the records. Raises
// (memory): call in protected mode. Stack: unchanged.
void RegisterStoreApi(lua_State* L, Scheduler* scheduler, KeyedStore* store);

}  // namespace lua_tasks
