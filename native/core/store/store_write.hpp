// SPDX-License-Identifier: MIT
// StoreWrite: one keyed write of a store batch, the one shape every writer of a batch hands over.
#pragma once

#include <optional>
#include <string>

namespace lua_tasks {

// The key spaces of a name (docs/design.md#the-store-interface): 1 tasks.store;
// durable tasks' journals, inboxes and index are 2, 3, 4 (durable_record.hpp).
inline constexpr int kSpaceStore = 1;

// A value under (space, key), or nullopt to delete the key.
struct StoreWrite {
  int space = kSpaceStore;
  std::string key;
  std::optional<std::string> value;
};

}  // namespace lua_tasks
