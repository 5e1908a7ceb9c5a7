// SPDX-License-Identifier: MIT
// JsStoreReader: tasks.store's committed records, read through the JS store's reader object.
#include "addon/store/store_reader.hpp"

#include <napi.h>

namespace lua_tasks {

namespace {

// What a JS value is, for a message about a wrong answer.
std::string Kind(const Napi::Value& v) {
  if (v.IsNull()) return "null";
  if (v.IsArray()) return "an array";
  switch (v.Type()) {
    case napi_undefined:
      return "undefined";
    case napi_string:
      return "a string";
    case napi_number:
      return "a number";
    case napi_boolean:
      return "a boolean";
    case napi_function:
      return "a function";
    default:
      return "an object";
  }
}

// Calls reader[method](args...). Throws Napi::Error for a JS exception.
Napi::Value CallMethod(napi_env env, napi_ref ref, const char* method, std::initializer_list<napi_value> args) {
  napi_value raw = nullptr;
  napi_get_reference_value(env, ref, &raw);  // not a Napi::Reference: that would delete ref when it goes
  Napi::Object reader(env, raw);
  Napi::Value fn = reader.Get(method);
  if (!fn.IsFunction()) {
    throw Napi::Error::New(env, std::string("the reader has no ") + method + "() method");
  }
  return fn.As<Napi::Function>().Call(reader, args);
}

}  // namespace

JsStoreReader::JsStoreReader(napi_env env, napi_value reader) : env_(env), ref_(nullptr) {
  napi_create_reference(env, reader, 1, &ref_);
}

JsStoreReader::~JsStoreReader() {
  if (ref_ != nullptr) napi_delete_reference(env_, ref_);
}

KeyedReader::Found JsStoreReader::Get(std::string_view key, std::string* value, std::string* error) {
  if (ref_ == nullptr) {
    *error = "the runtime is closing";
    return Found::kFailed;
  }
  try {
    Napi::Env env(env_);
    Napi::HandleScope scope(env);
    Napi::Value out = CallMethod(env_, ref_, "get", {Napi::String::New(env, key.data(), key.size())});
    if (out.IsNull() || out.IsUndefined()) return Found::kNo;
    if (!out.IsTypedArray() || out.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) {
      *error = "its reader's get() returned " + Kind(out) + " (expected a Buffer or null)";
      return Found::kFailed;
    }
    auto bytes = out.As<Napi::Uint8Array>();
    value->assign(reinterpret_cast<const char*>(bytes.Data()), bytes.ByteLength());
    return Found::kYes;
  } catch (const Napi::Error& e) {
    *error = "its reader's get() threw: " + e.Message();
  } catch (const std::exception& e) {
    *error = std::string("its reader's get() failed: ") + e.what();
  }
  return Found::kFailed;
}

bool JsStoreReader::Keys(std::string_view prefix, std::string_view after, size_t limit, std::vector<std::string>* keys,
                         std::string* error) {
  if (ref_ == nullptr) {
    *error = "the runtime is closing";
    return false;
  }
  try {
    Napi::Env env(env_);
    Napi::HandleScope scope(env);
    // "" for no `after`: no key is empty, so it sorts before every key.
    Napi::Value out = CallMethod(
        env_, ref_, "keys",
        {Napi::String::New(env, prefix.data(), prefix.size()), Napi::String::New(env, after.data(), after.size()),
         Napi::Number::New(env, static_cast<double>(limit))});
    if (!out.IsArray()) {
      *error = "its reader's keys() returned " + Kind(out) + " (expected an array of strings)";
      return false;
    }
    auto list = out.As<Napi::Array>();
    const uint32_t n = list.Length();
    for (uint32_t i = 0; i < n && keys->size() < limit; ++i) {
      Napi::Value k = list.Get(i);
      if (!k.IsString()) {
        *error = "its reader's keys() returned an array holding " + Kind(k) + " (expected strings)";
        return false;
      }
      keys->push_back(k.As<Napi::String>().Utf8Value());
    }
    return true;
  } catch (const Napi::Error& e) {
    *error = "its reader's keys() threw: " + e.Message();
  } catch (const std::exception& e) {
    *error = std::string("its reader's keys() failed: ") + e.what();
  }
  return false;
}

}  // namespace lua_tasks
