// SPDX-License-Identifier: MIT
// JournalBatch: durable tasks' records on their way from a runtime to its store, held by JS as one opaque value.
#pragma once

#include <napi.h>

#include <memory>
#include <vector>

#include "core/store/store_write.hpp"

namespace lua_tasks {

using SharedWrites = std::shared_ptr<const std::vector<StoreWrite>>;

// The records as one value JS passes along (an External): a directory
// store's write takes them natively, with no JS object or Buffer a record.
Napi::Value WrapJournal(Napi::Env env, std::vector<StoreWrite> writes);

// The records of a value WrapJournal made, else nullptr.
SharedWrites UnwrapJournal(Napi::Value value);

// The records as [{ space, key, value: Buffer | null }]: for a store written in JS.
Napi::Array JournalRecords(Napi::Env env, const std::vector<StoreWrite>& writes);

// The bytes the records carry (keys and values), as telemetry counts them.
size_t JournalBytes(const std::vector<StoreWrite>& writes);

}  // namespace lua_tasks
