// SPDX-License-Identifier: MIT
// Runtime: the JS class over one Lua state (lib/runtime/runtime.js wraps it), and its task methods.
#include "addon/runtime/runtime.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "addon/errors.hpp"
#include "addon/values/convert.hpp"
#include "addon/values/js_ref.hpp"

#include "addon/runtime/task_codes.hpp"
#include "addon/values/lua_value.hpp"
#include "core/api/lua_api_resolve.hpp"
#include "core/cron/cron_schedule.hpp"
#include "core/durable/durable_record.hpp"
#include "core/durable/replayer.hpp"
#include "core/scheduling/wait_census.hpp"
#include "core/store/persist_limits.hpp"

namespace lua_tasks {

namespace {

// The persistence limits lib/runtime/options.js resolved (maxValueBytes, ...) and
// what the store declares it takes (storeLimits, from lib/runtime/persist.js).
void SetPersistLimits(const Napi::Object& options, PersistLimits* limits) {
  const auto bytes = [](Napi::Value v, size_t* out) {
    if (v.IsNumber()) *out = static_cast<size_t>(std::min(v.As<Napi::Number>().DoubleValue(), 1.8e19));
  };
  bytes(options.Get("maxValueBytes"), &limits->value_bytes);
  bytes(options.Get("maxPendingBytes"), &limits->pending_bytes);
  bytes(options.Get("maxJournalBytes"), &limits->journal_bytes);
  limits->value_bytes = std::min(limits->value_bytes, kMaxStateBytes);
  Napi::Value store = options.Get("storeLimits");
  if (!store.IsObject()) return;
  const Napi::Object declared = store.As<Napi::Object>();
  size_t value = SIZE_MAX, key = SIZE_MAX, batch = SIZE_MAX;
  bytes(declared.Get("maxValueBytes"), &value);
  bytes(declared.Get("maxKeyBytes"), &key);
  bytes(declared.Get("maxBatchBytes"), &batch);
  limits->Narrow(value, key, batch, declared.Get("keyForbidsNul").ToBoolean());
}

// print(...) -> the JS print function (upvalue 1), one string per call, the
// arguments joined by tabs as Lua's own print does. Pure Lua API: may raise.
int l_print(lua_State* L) {
  const int n = lua_gettop(L);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 1; i <= n; ++i) {
    if (i > 1) luaL_addchar(&b, '\t');
    luaL_tolstring(L, i, nullptr);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, -2);
  lua_call(L, 1, 0);
  return 0;
}

LibProfile ParseLibs(const Napi::Object& options) {
  LibProfile p;
  Napi::Value libs = options.Get("libs");
  if (libs.IsString()) {
    p.kind = libs.As<Napi::String>().Utf8Value() == "all" ? LibProfile::Kind::kAll : LibProfile::Kind::kSafe;
  } else if (libs.IsArray()) {
    p.kind = LibProfile::Kind::kList;
    Napi::Array a = libs.As<Napi::Array>();
    for (uint32_t i = 0; i < a.Length(); ++i) p.names.push_back(a.Get(i).As<Napi::String>().Utf8Value());
  }
  return p;
}

}  // namespace

Napi::Function Runtime::Init(Napi::Env env) {
  return DefineClass(env, "NativeRuntime",
                     {
                         StaticValue("constants", TaskCodes(env)),
                         InstanceMethod<&Runtime::JS_load>("load"),
                         InstanceMethod<&Runtime::JS_set>("set"),
                         InstanceMethod<&Runtime::JS_get>("get"),
                         InstanceMethod<&Runtime::JS_close>("close"),
                         InstanceMethod<&Runtime::JS_stats>("stats"),
                         InstanceMethod<&Runtime::JS_start>("start"),
                         InstanceMethod<&Runtime::JS_resume>("resume"),
                         InstanceMethod<&Runtime::JS_send>("send"),
                         InstanceMethod<&Runtime::JS_cancel>("cancel"),
                         InstanceMethod<&Runtime::JS_taskState>("taskState"),
                         InstanceMethod<&Runtime::JS_taskUntil>("taskUntil"),
                         InstanceMethod<&Runtime::JS_tasks>("tasks"),
                         InstanceMethod<&Runtime::JS_waits>("waits"),
                         InstanceMethod<&Runtime::JS_idPrefix>("idPrefix"),
                         InstanceMethod<&Runtime::JS_keepAlive>("keepAlive"),
                         InstanceMethod<&Runtime::JS_setClockOffset>("setClockOffset"),
                         InstanceMethod<&Runtime::JS_preload>("preload"),
                         InstanceMethod<&Runtime::JS_isLoaded>("isLoaded"),
                         InstanceMethod<&Runtime::JS_modulePaths>("modulePaths"),
#ifdef LUA_TASKS_TEST_HOOKS
                         InstanceMethod<&Runtime::JS_snapshot>("snapshot"),
                         InstanceMethod<&Runtime::JS_restore>("restore"),
#endif
                         InstanceMethod<&Runtime::JS_snapshotBegin>("snapshotBegin"),
                         InstanceMethod<&Runtime::JS_snapshotStep>("snapshotStep"),
                         InstanceMethod<&Runtime::JS_snapshotAbort>("snapshotAbort"),
                         InstanceMethod<&Runtime::JS_restoreBegin>("restoreBegin"),
                         InstanceMethod<&Runtime::JS_restoreStep>("restoreStep"),
                         InstanceMethod<&Runtime::JS_setStoreReader>("setStoreReader"),
                         InstanceMethod<&Runtime::JS_takeWrites>("takeWrites"),
                         InstanceMethod<&Runtime::JS_confirmWrites>("confirmWrites"),
                         InstanceMethod<&Runtime::JS_putBackWrites>("putBackWrites"),
                         InstanceMethod<&Runtime::JS_takeJournal>("takeJournal"),
                         InstanceMethod<&Runtime::JS_journalRecords>("journalRecords"),
                         InstanceMethod<&Runtime::JS_journalBytes>("journalBytes"),
                         InstanceMethod<&Runtime::JS_restoreScan>("restoreScan"),
                         InstanceMethod<&Runtime::JS_restoreFeed>("restoreFeed"),
                         InstanceMethod<&Runtime::JS_restoreTasks>("restoreTasks"),
                         InstanceMethod<&Runtime::JS_restoreInbox>("restoreInbox"),
                         InstanceMethod<&Runtime::JS_restoreIndex>("restoreIndex"),
                         InstanceMethod<&Runtime::JS_restoreOne>("restoreOne"),
                         InstanceMethod<&Runtime::JS_indexMark>("indexMark"),
                         InstanceMethod<&Runtime::JS_indexFeed>("indexFeed"),
                         InstanceMethod<&Runtime::JS_indexFeedCopy>("indexFeedCopy"),
                         InstanceMethod<&Runtime::JS_indexNow>("indexNow"),
                         InstanceMethod<&Runtime::JS_indexFinish>("indexFinish"),
                         InstanceMethod<&Runtime::JS_restoreDescribe>("restoreDescribe"),
                         InstanceMethod<&Runtime::JS_activate>("activate"),
                         InstanceMethod<&Runtime::JS_activated>("activated"),
                         InstanceMethod<&Runtime::JS_writeIndex>("writeIndex"),
                         InstanceMethod<&Runtime::JS_dormantTasks>("dormantTasks"),
                         InstanceMethod<&Runtime::JS_setActivate>("setActivate"),
                         InstanceMethod<&Runtime::JS_restoreEnd>("restoreEnd"),
                         InstanceMethod<&Runtime::JS_forgetDurable>("forgetDurable"),
                         InstanceMethod<&Runtime::JS_pauseCollector>("pauseCollector"),
                         InstanceMethod<&Runtime::JS_setDurable>("setDurable"),
                         InstanceMethod<&Runtime::JS_putBackJournal>("putBackJournal"),
                         InstanceMethod<&Runtime::JS_inspect>("inspect"),
                         InstanceMethod<&Runtime::JS_describeRecords>("describeRecords"),
                         InstanceMethod<&Runtime::JS_setReplayOnly>("setReplayOnly"),
                         InstanceMethod<&Runtime::JS_lock>("lock"),
                         InstanceMethod<&Runtime::JS_unlock>("unlock"),
                     });
}

Runtime::Runtime(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Runtime>(info) {
  Napi::Env env = info.Env();
  Napi::Object options = info[0].As<Napi::Object>();
  LuaHostOptions opts;
  opts.libs = ParseLibs(options);
  Napi::Value limit = options.Get("memoryLimit");
  if (limit.IsNumber()) opts.memory_limit = static_cast<size_t>(limit.As<Napi::Number>().DoubleValue());
  // Positive ms (lib/runtime/options.js checks): at least 1 ns, since 0 means no limit.
  Napi::Value slice = options.Get("timeSlice");
  if (slice.IsNumber()) {
    opts.time_slice_ns = std::max<int64_t>(1, static_cast<int64_t>(slice.As<Napi::Number>().DoubleValue() * 1e6));
  }
  Napi::Value timeout = options.Get("taskTimeout");
  if (timeout.IsNumber()) {
    opts.task_timeout_ns = std::max<int64_t>(1, static_cast<int64_t>(timeout.As<Napi::Number>().DoubleValue() * 1e6));
  }

  core_ = std::make_shared<RuntimeCore>(env);
  // lib/runtime/options.js resolves the default (4 x memoryLimit, or a quarter of V8's
  // heap limit); this fallback is for a caller that did not.
  Napi::Value conversion = options.Get("conversionLimit");
  core_->conversion_limit = conversion.IsNumber() ? static_cast<size_t>(conversion.As<Napi::Number>().DoubleValue())
                                                  : (opts.memory_limit != 0 ? 4 * opts.memory_limit : size_t{1} << 30);
  // Before the host exists: its first os.time and every restored deadline
  // read the offset clock (ms, a finite number lib/options.js checks).
  Napi::Value offset = options.Get("clockOffsetMs");
  if (offset.IsNumber()) core_->clock.set_offset_ns(std::llround(offset.As<Napi::Number>().DoubleValue() * 1e6));
  opts.clock = &core_->clock;
  opts.interruptible = true;  // worker.terminate() and process.exit() stop running Lua
  std::string error;
  if (!core_->Assemble(opts, &core_->clock, core_.get(), &error)) {
    ThrowError(env, error.find("memory") != std::string::npos ? "ERR_MEMORY_LIMIT" : "ERR_LUA_RUNTIME",
               "Cannot create the Lua runtime: " + error);
  }
  core_->host->embedder = core_.get();
  core_->Attach(info[2], info[3], info[4]);
  core_->scheduler->set_has_store(options.Get("hasStore").ToBoolean());
  Napi::Value cache = options.Get("storeCacheBytes");  // a non-negative integer (lib/runtime/options.js checks)
  if (cache.IsNumber()) core_->keyed.set_cache_limit(static_cast<size_t>(cache.As<Napi::Number>().DoubleValue()));
  Napi::Value tz = options.Get("timeZone");
  if (tz.IsString()) {
    std::string zone_error;
    core_->scheduler->set_default_zone(FindZone(tz.As<Napi::String>().Utf8Value(), &zone_error));
  } else {
    core_->scheduler->set_default_zone(ProcessZone());
  }
  SetPersistLimits(options, &core_->scheduler->persist_limits());
  Napi::Value mailbox = options.Get("mailboxLimit");  // a positive integer (lib/runtime/options.js checks)
  if (mailbox.IsNumber()) core_->scheduler->set_mailbox_limit(mailbox.As<Napi::Number>().Uint32Value());
  lua_State* L = core_->host->main();
  LuaHost::HostSection section(core_->host.get(), L);
  RegisterJsRef(core_.get(), L, options.Get("trustedObjects").ToBoolean());
  if (info[1].IsFunction()) {
    PushJsRef(core_.get(), L, info[1], true);
    NameJsFunction(L, -1, "print");
    lua_pushcclosure(L, l_print, 1);
    lua_setglobal(L, "print");
  }
}

namespace {
// Room for `values` values from JS (plus `extra` for the call itself), or a
// clear error: the Lua stack holds about a million values, fewer when calls
// between JS and Lua are deeply nested.
void NeedStack(Napi::Env env, lua_State* L, uint32_t values, int extra, const char* what) {
  if (values <= 1000000 && lua_checkstack(L, static_cast<int>(values) + extra)) return;
  ThrowError(env, "ERR_LUA_RUNTIME",
             std::string(what) + ": the Lua stack has no room for " + std::to_string(values) +
                 " more values (it holds about 1,000,000 in all; pass fewer values, or nest fewer calls "
                 "between JS and Lua).");
}
}  // namespace

RuntimeCore* Runtime::OpenCore(Napi::Env env) {
  if (core_->closed()) ThrowError(env, "ERR_RUNTIME_CLOSED", "This Lua runtime is closed.");
  return core_.get();
}

Napi::Value Runtime::JS_load(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  LuaHost* host = core->host.get();
  std::string source = info[0].As<Napi::String>().Utf8Value();
  std::string chunkname;
  if (info[1].IsString()) {
    chunkname.push_back('=');
    chunkname.append(info[1].As<Napi::String>().Utf8Value());
  } else {
    chunkname = source;  // Lua shows it as [string "first line..."]
  }
  lua_State* L = host->current();
  const int base = lua_gettop(L);
  NeedStack(env, L, 0, 4, "Cannot load Lua code");
  int status;
  {
    LuaHost::Entry entry(host, L);  // parsing allocates: count it against the limit
    status = host->Load(L, source, chunkname.c_str());
  }
  if (status != LUA_OK) {
    Napi::Value err(env, LuaErrorToJs(core, L, status));
    lua_settop(L, base);
    throw Napi::Error(env, err);
  }
  return Napi::Value(env, CallLua(core, L, 0, true));
}

Napi::Value Runtime::JS_set(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  lua_State* L = core->host->current();
  const std::string name = info[0].As<Napi::String>().Utf8Value();
  return core->Entered([&] {
    LuaHost::HostSection section(core->host.get(), L);
    StackGuard stack(L);
    NeedStack(env, L, 0, 4, "Cannot set a Lua global");
    // Raw set: a metatable on _G must not run Lua code here.
    const size_t before = core->MemoryUsed();
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
    lua_pushlstring(L, name.data(), name.size());
    PushJs(core, L, info[1]);
    NameJsFunction(L, -1, name);  // a durable task's journal knows its calls by this name
    core->CheckMemory(L, stack.top(), before);
    lua_rawset(L, -3);
    return env.Undefined();
  });
}

Napi::Value Runtime::JS_get(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  lua_State* L = core->host->current();
  const std::string name = info[0].As<Napi::String>().Utf8Value();
  return core->Entered([&] {
    LuaHost::HostSection section(core->host.get(), L);
    StackGuard stack(L);
    NeedStack(env, L, 0, 4, "Cannot read a Lua global");
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
    lua_pushlstring(L, name.data(), name.size());
    lua_rawget(L, -2);
    return Napi::Value(env, ToJs(core, L, -1));
  });
}

namespace {

// Pushes the function a start() names: a Lua function handle, or a global
// name / dotted path ('mod.fn': globals first, then loaded modules).
// Returns false (nothing pushed) when the path names no function.
bool PushTarget(RuntimeCore* core, lua_State* L, const Napi::Value& fn) {
  if (!fn.IsString()) {
    PushJs(core, L, fn);
    if (lua_isfunction(L, -1) || lua_type(L, -1) == LUA_TTHREAD) return true;
    lua_pop(L, 1);
    return false;
  }
  // Most paths fit a stack buffer (Node-API copies whole characters only: a
  // length near the end means it may have stopped short).
  char buf[64];
  size_t len = 0;
  napi_get_value_string_utf8(fn.Env(), fn, buf, sizeof buf, &len);
  std::string long_path;
  if (len + 4 >= sizeof buf) long_path = fn.As<Napi::String>().Utf8Value();
  const std::string_view path = long_path.empty() ? std::string_view(buf, len) : std::string_view(long_path);
  // Every part must be non-empty: a leading '.' made the loop below start
  // over at the globals for ever, and "print." named print.
  if (path.empty() || path.front() == '.' || path.back() == '.' || path.find("..") != std::string_view::npos) {
    return false;
  }
  // Try globals, then every split "module.rest" of the loaded modules.
  for (size_t split = 0; split != std::string_view::npos;) {
    std::string_view rest(path);
    if (split == 0) {
      lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
    } else {
      luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
      lua_pushlstring(L, path.data(), split);
      lua_rawget(L, -2);
      lua_remove(L, -2);
      rest = path.substr(split + 1);
    }
    while (lua_istable(L, -1) && !rest.empty()) {
      const size_t dot = rest.find('.');
      const std::string_view part = rest.substr(0, dot);
      lua_pushlstring(L, part.data(), part.size());
      lua_rawget(L, -2);
      lua_remove(L, -2);
      rest = dot == std::string_view::npos ? std::string_view() : rest.substr(dot + 1);
    }
    if (rest.empty() && lua_isfunction(L, -1)) return true;
    lua_pop(L, 1);
    split = path.find('.', split == 0 ? 0 : split + 1);
  }
  if (path.find('.') == std::string_view::npos) return false;
  // Not loaded yet: the Lua resolver requires the module (running its code).
  lua_getfield(L, LUA_REGISTRYINDEX, kResolveRegistryKey);
  lua_rawgeti(L, -1, 1);
  lua_remove(L, -2);
  if (!lua_isfunction(L, -1)) {
    lua_pop(L, 1);
    return false;
  }
  lua_pushlstring(L, path.data(), path.size());
  int status;
  {
    LuaHost::Entry entry(core->host.get(), L);
    status = core->host->PCall(L, 1, 1);
  }
  if (status != LUA_OK) {
    // A module on the path failed to load (its top level raised, or it is
    // loading in a task): that error says more than "not a Lua function".
    Napi::Env env = fn.Env();
    Napi::Value err(env, LuaErrorToJs(core, L, status));
    lua_pop(L, 1);
    throw Napi::Error(env, err);
  }
  if (lua_isfunction(L, -1)) return true;
  lua_pop(L, 1);
  return false;
}

}  // namespace

namespace {

// Pushes a JS array's values onto L as Lua values; the caller's StackGuard
// takes them off again if one cannot cross (or the memory limit is hit).
void PushJsArgs(RuntimeCore* core, lua_State* L, const Napi::Array& args, int base) {
  const uint32_t n = args.Length();
  const size_t before = core->MemoryUsed();
  ValueArray array(n);
  napi_value* values = array.data();
  for (uint32_t i = 0; i < n; ++i) values[i] = args.Get(i);
  PushJsValues(core, L, values, n);  // one conversion: an object given twice is one table
  core->CheckMemory(L, base, before);
}

// A durable task's start (JS_start's info[3]), made by durable_start.hpp.
// New ({ key, label? }): pushes the arguments and fills *out with its start
// record. Restored ({ id }): fills *out with its records (Runtime.open's
// restore set) and pushes the arguments its start record holds. Returns
// the count of arguments pushed. Out of line: JS_start's ephemeral path
// stays as small as it was (inlined, this took JS_start's inlining budget).
[[gnu::noinline]] uint32_t PrepareDurableStart(RuntimeCore* core, lua_State* L, const Napi::Value& entry,
                                               const Napi::Array& args, const Napi::Object& durable, int base,
                                               DurableStart* out) {
  Napi::Env env(core->env);
  std::string error;
  if (durable.Has("id")) {
    std::string id = durable.Get("id").As<Napi::String>().Utf8Value();
    std::vector<std::string> records;
    if (core->restoring) records = core->restoring->TakeJournal(id);
    const int count = RestoreStart(L, std::move(id), std::move(records), out, &error);
    if (count < 0) ThrowError(env, "ERR_STORE_CORRUPT", error);
    return static_cast<uint32_t>(count);
  }
  PushJsArgs(core, L, args, base);
  const uint32_t n = args.Length();
  NeedStack(env, L, static_cast<int>(n) + 3, 0, "Cannot start a task");
  Napi::Value key = durable.Get("key");
  Napi::Value label = durable.Get("label");
  std::optional<std::string> key_text, label_text;
  if (key.IsString()) key_text = key.As<Napi::String>().Utf8Value();
  if (label.IsString()) label_text = label.As<Napi::String>().Utf8Value();
  if (!NewStart(L, entry.As<Napi::String>().Utf8Value(), std::move(key_text), std::move(label_text),
                static_cast<int>(n), out, &error)) {
    ThrowError(env, "ERR_CONVERSION",
               "Cannot start a durable task: its arguments must persist (strings, numbers, booleans, tables of "
               "them): " +
                   error + ".");
  }
  return n;
}
}  // namespace

Napi::Value Runtime::JS_start(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  lua_State* L = core->host->current();
  Napi::Array args = info[1].As<Napi::Array>();
  // info[3]: a durable task's { key } (new) or { id } (restored):
  // docs/durable.md.
  Napi::Value durable = info[3];
  uint32_t n = args.Length();
  Scheduler::StartError error = Scheduler::StartError::kNotStartable;
  std::optional<EndKind> end_kind;
  std::unique_ptr<DurableStart> durable_start;  // on the heap: an ephemeral start pays a null pointer
  const uint64_t key = core->Entered([&] {
    StackGuard stack(L);  // left before AfterEntry, which may close the state
    NeedStack(env, L, n, 8, "Cannot start a task");
    {
      LuaHost::HostSection section(core->host.get(), L);
      if (!PushTarget(core, L, info[0])) {
        std::string what = "this value";
        if (info[0].IsString()) {
          what.assign(1, '"');
          what += info[0].As<Napi::String>().Utf8Value();
          what += '"';
        }
        ThrowError(env, "ERR_INVALID_ARG_VALUE",
                   "Cannot start a task: " + what +
                       " is not a Lua function (give a global name, a 'module.fn' path, or a Lua function).");
      }
      if (durable.IsObject()) {
        n = PrepareDurableStart(core, L, info[0], args, durable.As<Napi::Object>(), stack.top(),
                                (durable_start = std::make_unique<DurableStart>()).get());
      } else {
        PushJsArgs(core, L, args, stack.top());
      }
    }
    if (core->closed()) ThrowError(env, "ERR_RUNTIME_CLOSED", "This Lua runtime is closed.");  // by a getter
    RuntimeCore::DirectStart direct(core, core->scheduler->next_key(),
                                    info[2].IsArray() ? static_cast<napi_value>(info[2]) : nullptr);
    const uint64_t started = core->scheduler->Start(L, static_cast<int>(n), true, &error, durable_start.get());
    end_kind = direct.kind();
    return started;
  });
  if (key == 0 && error == Scheduler::StartError::kNoStackRoom) {
    ThrowError(env, "ERR_LUA_RUNTIME",
               "Cannot start a task: not enough memory for its Lua stack to take " + std::to_string(n) + " arguments.");
  }
  if (key == 0 && error == Scheduler::StartError::kMainThread) {
    ThrowError(env, "ERR_INVALID_ARG_VALUE",
               "Cannot start a task: the runtime's main thread cannot become a task (it runs the calls from JS).");
  }
  if (key == 0) ThrowError(env, "ERR_INVALID_ARG_VALUE", "Cannot start a task: the coroutine was already started.");
  return Napi::Number::New(env, PackStart(key, end_kind));
}

namespace {

// The key in a task id string, read into a stack buffer: an id is
// kIdLength ASCII characters, past SSO, and a heap string per call was 9% of
// rt.resume. Node-API copies whole characters only, so the buffer has room
// for one more of up to 4 bytes: any longer string comes out longer than
// kIdLength, which ParseId refuses (with 2 bytes spare, id + "é" was read as
// the id).
bool ReadKey(const Napi::Value& id, const Scheduler& s, uint64_t* key) {
  char buf[Scheduler::kIdLength + 5];
  size_t n = 0;
  if (napi_get_value_string_utf8(id.Env(), id, buf, sizeof buf, &n) != napi_ok) return false;
  return s.ParseId(std::string_view(buf, n), key);
}

// ReadKey for an operation on the task: a dormant task is activated first.
bool ResolveKey(const Napi::Value& id, Scheduler& s, uint64_t* key) {
  if (ReadKey(id, s, key)) return true;
  if (s.replayer() == nullptr || (s.replayer()->dormant().empty() && s.replayer()->activations().empty())) return false;
  char buf[Scheduler::kIdLength + 5];
  size_t n = 0;
  if (napi_get_value_string_utf8(id.Env(), id, buf, sizeof buf, &n) != napi_ok) return false;
  return s.Resolve(std::string_view(buf, n), key);
}

// The dormant task `id` names (or one being read from the store), if any:
// answered without activating it.
const DormantTasks::Entry* DormantOf(const Napi::Value& id, const Scheduler& s) {
  const Replayer* r = s.replayer();
  if (r == nullptr || (r->dormant().empty() && r->activations().empty())) return nullptr;
  char buf[Scheduler::kIdLength + 5];
  size_t n = 0;
  if (napi_get_value_string_utf8(id.Env(), id, buf, sizeof buf, &n) != napi_ok) return nullptr;
  if (const DormantTasks::Entry* e = r->dormant().Find(std::string_view(buf, n))) return e;
  const Activations::Activation* a = r->activations().Find(std::string_view(buf, n));
  return a != nullptr ? &a->entry : nullptr;
}

[[noreturn]] void ThrowMailboxFull(Napi::Env env, const Scheduler& s, const std::string& how) {
  ThrowError(env, "ERR_MAILBOX_FULL",
             "Cannot send a message: the task's mailbox is full" + how + " (" + std::to_string(s.mailbox_limit()) +
                 " messages, the mailboxLimit option); it takes them with tasks.receive().");
}

// The task `id` names if a store reading asynchronously is restoring it
// (after ResolveKey, which starts that): the call is answered from its
// wait, and lib/runtime makes it once the task is restored (kAfterRestore).
Activations::Activation* ActivationOf(const Napi::Value& id, Scheduler& s) {
  if (s.replayer() == nullptr || s.replayer()->activations().empty()) return nullptr;
  char buf[Scheduler::kIdLength + 5];
  size_t n = 0;
  if (napi_get_value_string_utf8(id.Env(), id, buf, sizeof buf, &n) != napi_ok) return nullptr;
  return s.replayer()->activations().Find(std::string_view(buf, n));
}
}  // namespace

Napi::Value Runtime::JS_resume(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  uint64_t key;
  const DormantTasks::Entry* dormant = DormantOf(info[0], *core->scheduler);
  const bool resumable_dormant = dormant != nullptr && IsResumable(dormant->kind);
  if (!ResolveKey(info[0], *core->scheduler, &key)) {
    // The first resume of a task being restored whose wait takes one.
    Activations::Activation* a = ActivationOf(info[0], *core->scheduler);
    if (a == nullptr || a->Resume() == Activations::Answer::kRefused) return Napi::Boolean::New(env, false);
    return Napi::Number::New(env, kAfterRestore);
  }
  Task* t = core->scheduler->Find(key);
  if (resumable_dormant && t != nullptr && t->status == TaskStatus::kWaiting && t->wait == WaitKind::kNone &&
      core->scheduler->locked()) {
    // Activated while a COMMIT's snapshot is taken: its replay runs at the
    // unlock, and the resume must follow it (2: the JS side does that).
    return Napi::Number::New(env, 2);
  }
  if (t == nullptr || !t->resumable()) return Napi::Boolean::New(env, false);
  lua_State* L = core->host->current();
  Napi::Array args = info[1].As<Napi::Array>();
  const uint32_t n = args.Length();
  const Scheduler::ResumeResult r = core->Entered([&] {
    StackGuard stack(L);  // left before AfterEntry, which may close the state
    NeedStack(env, L, n, 4, "Cannot resume a task");
    {
      LuaHost::HostSection section(core->host.get(), L);
      PushJsArgs(core, L, args, stack.top());
    }
    if (core->closed()) ThrowError(env, "ERR_RUNTIME_CLOSED", "This Lua runtime is closed.");  // by a getter
    return core->scheduler->Resume(key, L, static_cast<int>(n));
  });
  if (r == Scheduler::ResumeResult::kNoStackRoom) {
    ThrowError(env, "ERR_LUA_RUNTIME",
               "Cannot resume the task: its Lua stack has no room for " + std::to_string(n) +
                   " more values (it holds about 1,000,000 in all).");
  }
  return Napi::Boolean::New(env, r == Scheduler::ResumeResult::kResumed);
}

// The values are converted now (the task may take them much later) and kept
// in its mailbox; lib/runtime/runtime.js has checked that there is a first value and
// that it is not null or undefined.
Napi::Value Runtime::JS_send(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  uint64_t key;
  if (!ResolveKey(info[0], *core->scheduler, &key)) {
    // Held in JS until the task is read, as many as its mailbox would hold.
    Activations::Activation* a = ActivationOf(info[0], *core->scheduler);
    const Activations::Answer answer =
        a == nullptr ? Activations::Answer::kRefused : a->Send(core->scheduler->mailbox_limit());
    if (answer == Activations::Answer::kFull) {
      ThrowMailboxFull(env, *core->scheduler, " with the messages sent while it is read from the store");
    }
    if (answer == Activations::Answer::kRefused) return Napi::Boolean::New(env, false);
    return Napi::Number::New(env, kAfterRestore);
  }
  if (core->scheduler->Find(key) == nullptr) return Napi::Boolean::New(env, false);
  lua_State* L = core->host->current();
  Napi::Array args = info[1].As<Napi::Array>();
  const uint32_t n = args.Length();
  const Scheduler::SendResult r = core->Entered([&] {
    StackGuard stack(L);
    NeedStack(env, L, n, 4, "Cannot send a message");
    LuaHost::HostSection section(core->host.get(), L);
    PushJsArgs(core, L, args, stack.top());
    if (core->closed()) ThrowError(env, "ERR_RUNTIME_CLOSED", "This Lua runtime is closed.");  // by a getter
    return core->scheduler->Send(key, L, static_cast<int>(n));
  });
  if (r == Scheduler::SendResult::kNotPersistable) {
    ThrowError(env, "ERR_CONVERSION",
               "Cannot send to the durable task " + info[0].As<Napi::String>().Utf8Value() +
                   ": its messages must persist (strings, numbers, booleans, tables of them): " +
                   core->scheduler->last_send_error() + ".");
  }
  if (r == Scheduler::SendResult::kFull) ThrowMailboxFull(env, *core->scheduler, "");
  return Napi::Boolean::New(env, r == Scheduler::SendResult::kQueued);
}

Napi::Value Runtime::JS_cancel(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  uint64_t key;
  if (!ResolveKey(info[0], *core->scheduler, &key)) {
    Activations::Activation* a = ActivationOf(info[0], *core->scheduler);
    if (a == nullptr || a->Cancel() == Activations::Answer::kRefused) return Napi::Boolean::New(env, false);
    return Napi::Number::New(env, kAfterRestore);
  }
  const bool ok = core->Entered([&] { return core->scheduler->Cancel(key); });
  return Napi::Boolean::New(env, ok);
}

namespace {

// When a waiting task's timed wait ends, in wall-clock ms, or undefined.
Napi::Value UntilMs(Napi::Env env, const Scheduler& s, const Task* t) {
  const auto until = t != nullptr ? s.WaitEndsWallNs(*t) : std::nullopt;
  if (!until) return env.Undefined();
  return Napi::Number::New(env, static_cast<double>(*until / 1000000));
}

}  // namespace

Napi::Value Runtime::JS_taskState(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Scheduler* s = OpenCore(env)->scheduler.get();
  uint64_t key;
  if (!ReadKey(info[0], *s, &key)) {
    const DormantTasks::Entry* d = DormantOf(info[0], *s);
    return d != nullptr ? Napi::Value(Napi::Number::New(env, PackState(TaskStatus::kWaiting, d->kind)))
                        : env.Undefined();
  }
  if (const Task* t = s->Find(key)) {
    return Napi::Number::New(env, PackState(t->status, t->current_wait()));
  }
  if (const Scheduler::Finished* f = s->FindFinished(key)) {
    return Napi::Number::New(env, PackState(f->host_failed ? TaskStatus::kFailed : f->status, WaitKind::kNone));
  }
  return env.Undefined();
}

Napi::Value Runtime::JS_taskUntil(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Scheduler* s = OpenCore(env)->scheduler.get();
  uint64_t key;
  if (!ReadKey(info[0], *s, &key)) {
    const DormantTasks::Entry* d = DormantOf(info[0], *s);
    if (d == nullptr || d->wall_deadline == 0) return env.Undefined();
    return Napi::Number::New(env, static_cast<double>(d->wall_deadline / 1000000));
  }
  return UntilMs(env, *s, s->Find(key));
}

Napi::Value Runtime::JS_tasks(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  Scheduler* s = core->scheduler.get();
  std::vector<uint64_t> keys;
  s->tasks().ForEach([&](const Task& t) {
    // Not one still winding down, nor a detached part (see Scheduler::Find).
    if (!t.ended() && (t.family & Task::kPart) == 0) keys.push_back(t.key);
  });
  std::sort(keys.begin(), keys.end());
  // JS builds the snapshots, as it does for taskState: one builder.
  Napi::Array out = Napi::Array::New(env, 3 * keys.size());
  uint32_t i = 0;
  for (const uint64_t key : keys) {
    const Task* t = s->Find(key);
    out.Set(i++, static_cast<double>(key));
    out.Set(i++, PackState(t->status, t->current_wait()));
    out.Set(i++, UntilMs(env, *s, t));
  }
  return out;
}

Napi::Value Runtime::JS_waits(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  const WaitCensus c = TakeWaitCensus(core->scheduler->tasks());
  Napi::Array out = Napi::Array::New(env, kWaitKindSlots + 1);
  for (uint32_t i = 0; i < kWaitKindSlots; ++i) out.Set(i, static_cast<double>(c.waiting[i]));
  const int64_t age = core->scheduler->clock()->MonoNs() - c.oldest_wait_start;
  out.Set(static_cast<uint32_t>(kWaitKindSlots), c.any_waiting ? static_cast<double>(age) / 1e6 : -1.0);
  return out;
}

Napi::Value Runtime::JS_idPrefix(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Napi::String::New(env, OpenCore(env)->scheduler->id_prefix());
}

Napi::Value Runtime::JS_keepAlive(const Napi::CallbackInfo& info) {
  if (!core_->closed() && core_->driver) core_->driver->SetKeepAlive(info[0].ToBoolean());
  return info.Env().Undefined();
}

Napi::Value Runtime::JS_setClockOffset(const Napi::CallbackInfo& info) {
  RuntimeCore* core = OpenCore(info.Env());
  const int64_t ns = std::llround(info[0].As<Napi::Number>().DoubleValue() * 1e6);
  const int64_t by = ns - core->clock.offset_ns();
  core->clock.set_offset_ns(ns);
  core->scheduler->WallClockMoved(by);
  return info.Env().Undefined();
}

Napi::Value Runtime::JS_close(const Napi::CallbackInfo& info) {
  core_->Close();
  return info.Env().Undefined();
}

Napi::Value Runtime::JS_stats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RuntimeCore* core = OpenCore(env);
  const MemoryBudget& m = core->host->memory();
  Napi::Object out = Napi::Object::New(env);
  out.Set("memoryUsed", Napi::Number::New(env, static_cast<double>(m.used)));
  out.Set("memoryPeak", Napi::Number::New(env, static_cast<double>(m.peak)));
  out.Set("memoryLimit", Napi::Number::New(env, static_cast<double>(m.limit)));
  out.Set("conversionLimit", Napi::Number::New(env, static_cast<double>(core->conversion_limit)));
  out.Set("tasks", Napi::Number::New(env, static_cast<double>(core->scheduler->task_count())));
  // Live durable tasks: a fleet member hibernates a runtime only when every live task is one.
  const Replayer* durable = core->scheduler->replayer();
  out.Set("durableTasks", Napi::Number::New(env, durable != nullptr ? static_cast<double>(durable->count()) : 0));
  // Durable tasks left in the store at open, not in memory (docs/durable.md#restore-at-open).
  out.Set("dormantTasks", Napi::Number::New(env, durable != nullptr ? static_cast<double>(durable->dormant().size() +
                                                                                          durable->activations().size())
                                                                    : 0));
  const CpuBudget* b = core->host->budget();
  out.Set("preemptions", Napi::Number::New(env, b != nullptr ? static_cast<double>(b->preemptions()) : 0));
  return out;
}

}  // namespace lua_tasks
