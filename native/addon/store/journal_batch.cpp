// SPDX-License-Identifier: MIT
// JournalBatch: durable tasks' records on their way from a runtime to its store (see journal_batch.hpp).
#include "addon/store/journal_batch.hpp"

namespace lua_tasks {

namespace {

// Marks the Externals that are journal batches (UnwrapJournal).
constexpr napi_type_tag kJournalBatchTag = {0x6c75612d7461736bULL, 0x6a6f75726e616c31ULL};

struct Held {
  SharedWrites writes;
};

}  // namespace

Napi::Value WrapJournal(Napi::Env env, std::vector<StoreWrite> writes) {
  auto* held =
      new Held{std::make_shared<const std::vector<StoreWrite>>(std::move(writes))};  // NOLINT: the finalizer deletes it
  auto out = Napi::External<Held>::New(env, held, [](Napi::Env, Held* h) { delete h; });  // NOLINT
  out.TypeTag(&kJournalBatchTag);
  return out;
}

SharedWrites UnwrapJournal(Napi::Value value) {
  if (!value.IsExternal()) return nullptr;
  auto external = value.As<Napi::External<Held>>();
  if (!external.CheckTypeTag(&kJournalBatchTag)) return nullptr;
  return external.Data()->writes;
}

Napi::Array JournalRecords(Napi::Env env, const std::vector<StoreWrite>& writes) {
  Napi::Array out = Napi::Array::New(env, writes.size());
  uint32_t i = 0;
  for (const StoreWrite& w : writes) {
    Napi::Object record = Napi::Object::New(env);
    record.Set("space", Napi::Number::New(env, w.space));
    record.Set("key", Napi::String::New(env, w.key));
    record.Set("value",
               w.value ? Napi::Value(Napi::Buffer<char>::Copy(env, w.value->data(), w.value->size())) : env.Null());
    out.Set(i++, record);
  }
  return out;
}

size_t JournalBytes(const std::vector<StoreWrite>& writes) {
  size_t n = 0;
  for (const StoreWrite& w : writes) n += w.key.size() + (w.value ? w.value->size() : 0);
  return n;
}

}  // namespace lua_tasks
