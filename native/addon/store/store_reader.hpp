// SPDX-License-Identifier: MIT
// JsStoreReader: tasks.store's committed records, read through the JS store's reader object.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <node_api.h>

#include "core/store/keyed_store.hpp"

namespace lua_tasks {

// Calls reader.get(key) -> Buffer | null and reader.keys(prefix, after,
// limit) -> string[] (store interface v2, docs/persistence.md) on the loop
// thread, from inside a tasks.store call. A JS exception, or an answer of the
// wrong shape, becomes a failure whose message names it; nothing is left
// pending and no C++ exception leaves (a Lua frame is above).
class JsStoreReader : public KeyedReader {
 public:
  JsStoreReader(napi_env env, napi_value reader);
  ~JsStoreReader() override;
  JsStoreReader(const JsStoreReader&) = delete;
  JsStoreReader& operator=(const JsStoreReader&) = delete;

  // The environment is being torn down: drop the reference without a call.
  void Abandon() { ref_ = nullptr; }

  Found Get(std::string_view key, std::string* value, std::string* error) override;
  bool Keys(std::string_view prefix, std::string_view after, size_t limit, std::vector<std::string>* keys,
            std::string* error) override;

 private:
  napi_env env_;
  napi_ref ref_;  // strong: the reader lives as long as the runtime uses it
};

}  // namespace lua_tasks
