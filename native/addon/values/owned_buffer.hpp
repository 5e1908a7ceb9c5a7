// SPDX-License-Identifier: MIT
// OwnedBuffer: a JS Buffer over a block the addon owns, freed with it; a copy where V8 refuses external buffers.
#pragma once

#include <memory>
#include <utility>

#include <napi.h>

namespace lua_tasks {

// `bytes` (anything with data() and size(), e.g. std::string) handed to JS
// without a copy: the Buffer's finalizer frees it. A runtime whose V8 keeps
// its memory in a sandbox (Electron) refuses external buffers; there the
// bytes are copied and freed at once.
template <typename Bytes>
Napi::Value OwnedBuffer(Napi::Env env, Bytes bytes) {
  auto owned = std::make_unique<Bytes>(std::move(bytes));
  napi_value out;
  if (napi_create_external_buffer(
          env, owned->size(), const_cast<char*>(owned->data()),
          [](napi_env, void*, void* hint) { std::unique_ptr<Bytes> freed(static_cast<Bytes*>(hint)); }, owned.get(),
          &out) == napi_ok) {
    owned.release();  // the Buffer's finalizer has it now
    return Napi::Value(env, out);
  }
  return Napi::Buffer<char>::Copy(env, owned->data(), owned->size());
}

}  // namespace lua_tasks
