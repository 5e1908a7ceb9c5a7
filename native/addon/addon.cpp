// SPDX-License-Identifier: MIT
// The addon's entry point: a context-aware module, one instance per environment.
#include <napi.h>

#include "addon/addon_data.hpp"
#include "addon/cron.hpp"
#include "addon/runtime/runtime.hpp"
#include "addon/store/lock_handle.hpp"
#include "addon/store/native_store.hpp"

namespace lua_tasks {

namespace {
constexpr const char kMapHelpers[] = R"js((() => {
  'use strict';
  const size = Object.getOwnPropertyDescriptor(Map.prototype, 'size').get;
  const next = Object.getPrototypeOf(new Map().entries()).next;
  return {
    size(v) {
      try {
        return size.call(v);
      } catch {
        return -1;
      }
    },
    chunk(it, out, max) {
      let n = 0;
      while (n < max) {
        const r = next.call(it);
        if (r.done) break;
        out[n++] = r.value[0];
        out[n++] = r.value[1];
      }
      return n;
    },
  };
})())js";
}  // namespace

class LuaTasksAddon : public Napi::Addon<LuaTasksAddon> {
 public:
  LuaTasksAddon(Napi::Env env, Napi::Object exports) {
    Napi::Object global = env.Global();
    Napi::Function map = global.Get("Map").As<Napi::Function>();
    Napi::Object map_proto = map.Get("prototype").As<Napi::Object>();
    AddonData& d = data;
    d.map_ctor = Napi::Persistent(map);
    d.map_get = Napi::Persistent(map_proto.Get("get").As<Napi::Function>());
    d.map_set = Napi::Persistent(map_proto.Get("set").As<Napi::Function>());
    // A Map crosses entry by entry, a chunk at a time: Array.from(map) made
    // every pair at once, doubling a huge Map in the JS heap before the
    // memory limit could be checked. The helpers are captured now, so a
    // Map's own iterator or a patched prototype is never what runs.
    Napi::Object helpers = env.RunScript(kMapHelpers).As<Napi::Object>();
    d.map_size = Napi::Persistent(helpers.Get("size").As<Napi::Function>());
    d.map_entries = Napi::Persistent(map_proto.Get("entries").As<Napi::Function>());
    d.map_chunk = Napi::Persistent(helpers.Get("chunk").As<Napi::Function>());

    InitCron(env, exports);
    d.lock_handle = Napi::Persistent(LockHandle::Init(env));
    InitFileLock(env, exports);
    DefineAddon(exports, {
                             InstanceMethod<&LuaTasksAddon::JS_init>("init"),
                             InstanceValue("NativeRuntime", Runtime::Init(env)),
                             InstanceValue("NativeStore", NativeStore::Init(env)),
                         });
  }

  AddonData data;

 private:
  // init({ makeError, awaitPromise, warnUnheard, receiver, classify, readOwn,
  // errorField, errorText, unwrapThrown, addWhere }): lib hands over its error factory, the helper
  // that subscribes to a promise for an awaiting task, the warning for
  // failures no Runtime can hear, and the boundary's helpers (lib/runtime/boundary.js).
  Napi::Value JS_init(const Napi::CallbackInfo& info) {
    Napi::Object helpers = info[0].As<Napi::Object>();
    data.make_error = Napi::Persistent(helpers.Get("makeError").As<Napi::Function>());
    data.await_helper = Napi::Persistent(helpers.Get("awaitPromise").As<Napi::Function>());
    data.warn_unheard = Napi::Persistent(helpers.Get("warnUnheard").As<Napi::Function>());
    data.receiver = Napi::Persistent(helpers.Get("receiver").As<Napi::Object>());
    data.classify = Napi::Persistent(helpers.Get("classify").As<Napi::Function>());
    data.read_own = Napi::Persistent(helpers.Get("readOwn").As<Napi::Function>());
    data.error_field = Napi::Persistent(helpers.Get("errorField").As<Napi::Function>());
    data.error_text = Napi::Persistent(helpers.Get("errorText").As<Napi::Function>());
    data.unwrap_thrown = Napi::Persistent(helpers.Get("unwrapThrown").As<Napi::Function>());
    data.add_where = Napi::Persistent(helpers.Get("addWhere").As<Napi::Function>());
    return info.Env().Undefined();
  }
};

AddonData* AddonData::From(napi_env env) {
  return &Napi::Env(env).GetInstanceData<LuaTasksAddon>()->data;
}

}  // namespace lua_tasks

using lua_tasks::LuaTasksAddon;
NODE_API_ADDON(LuaTasksAddon)
