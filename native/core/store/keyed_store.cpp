// SPDX-License-Identifier: MIT
// KeyedStore: a runtime's tasks.store records: unflushed writes, writes in flight, a cache, the store's reader.
#include "core/store/keyed_store.hpp"

#include <algorithm>
#include <map>
#include <utility>

namespace lua_tasks {

namespace {

bool HasPrefix(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

}  // namespace

const KeyedWrite* KeyedStore::Ordered::Find(std::string_view key) const {
  if (entries.empty()) return nullptr;
  auto it = index.find(std::string(key));
  return it == index.end() ? nullptr : &entries[it->second];
}

size_t KeyedStore::WriteBytes(const KeyedWrite& w) {
  return w.key.size() + (w.value ? w.value->size() : 0);
}

void KeyedStore::Ordered::Put(std::string_view key, std::optional<std::string> value) {
  auto [it, added] = index.try_emplace(std::string(key), entries.size());
  if (added) {
    entries.push_back({std::string(key), std::move(value)});
  } else {
    bytes -= WriteBytes(entries[it->second]);
    entries[it->second].value = std::move(value);  // keeps its first position
  }
  bytes += WriteBytes(entries[it->second]);
}

void KeyedStore::set_reader(std::unique_ptr<KeyedReader> reader) {
  reader_ = std::move(reader);
  cache_index_.clear();
  cache_.clear();
  cache_used_ = 0;
}

void KeyedStore::set_cache_limit(size_t bytes) {
  cache_limit_ = bytes;
  CacheTrim();
}

void KeyedStore::Set(std::string_view key, std::string bytes) {
  dirty_.Put(key, std::move(bytes));
}

void KeyedStore::Delete(std::string_view key) {
  dirty_.Put(key, std::nullopt);
}

const KeyedWrite* KeyedStore::Unconfirmed(std::string_view key) const {
  if (const KeyedWrite* w = dirty_.Find(key)) return w;
  return flight_.Find(key);
}

KeyedStore::Read KeyedStore::Get(std::string_view key, std::string* bytes, std::string* error) {
  if (const KeyedWrite* w = Unconfirmed(key)) {
    if (!w->value) return Read::kMissing;
    *bytes = *w->value;
    return Read::kFound;
  }
  if (auto it = cache_index_.find(key); it != cache_index_.end()) {
    cache_.splice(cache_.begin(), cache_, it->second);  // most recently used
    const CacheEntry& e = *it->second;
    if (!e.value) return Read::kMissing;
    *bytes = *e.value;
    return Read::kFound;
  }
  if (!reader_) return Read::kMissing;
  std::string value;
  switch (reader_->Get(key, &value, error)) {
    case KeyedReader::Found::kFailed:
      return Read::kFailed;
    case KeyedReader::Found::kNo:
      CachePut(key, std::nullopt);
      return Read::kMissing;
    case KeyedReader::Found::kYes:
      break;
  }
  *bytes = value;
  CachePut(key, std::move(value));
  return Read::kFound;
}

bool KeyedStore::Keys(std::string_view prefix, std::string_view after, size_t limit, std::vector<std::string>* keys,
                      std::string* error) {
  keys->clear();
  if (limit == 0) return true;
  // The unconfirmed writes in range: key -> set (true) or deleted (false);
  // the dirty map's word wins over the flight's.
  std::map<std::string, bool, std::less<>> overlay;
  for (const Ordered* layer : {&flight_, &dirty_}) {
    for (const KeyedWrite& w : layer->entries) {
      if (HasPrefix(w.key, prefix) && std::string_view(w.key) > after) overlay[w.key] = w.value.has_value();
    }
  }
  // Page through the reader. Each page covers (cursor, bound]: the reader's
  // keys there minus deletes, merged with the overlay's sets there. A full
  // page whose deletes left it short asks for the next one.
  std::string cursor(after);
  auto next_set = overlay.upper_bound(cursor);
  std::vector<std::string> page;
  for (;;) {
    page.clear();
    if (reader_ && !reader_->Keys(prefix, cursor, limit, &page, error)) return false;
    const bool last = page.size() < limit;
    std::string bound = last ? std::string() : page.back();  // the page covers (cursor, bound]
    std::vector<std::string> merged;
    for (std::string& k : page) {
      auto o = overlay.find(k);
      if (o == overlay.end()) merged.push_back(std::move(k));  // an overlay set is added below
    }
    for (; next_set != overlay.end() && (last || next_set->first <= bound); ++next_set) {
      if (next_set->second) merged.push_back(next_set->first);
    }
    std::sort(merged.begin(), merged.end());
    for (std::string& k : merged) {
      if (keys->size() == limit) return true;
      keys->push_back(std::move(k));
    }
    if (last || keys->size() == limit) return true;
    cursor = std::move(bound);
  }
}

std::vector<KeyedWrite> KeyedStore::Take() {
  flight_ = std::move(dirty_);
  dirty_.clear();
  return flight_.entries;
}

void KeyedStore::Confirm() {
  for (KeyedWrite& w : flight_.entries) CachePut(w.key, std::move(w.value));
  flight_.clear();
}

void KeyedStore::PutBack(std::vector<KeyedWrite> writes) {
  Ordered again;
  for (KeyedWrite& w : writes) {
    if (dirty_.Find(w.key) == nullptr) again.Put(w.key, std::move(w.value));  // not written since the take
  }
  for (KeyedWrite& w : dirty_.entries) again.Put(w.key, std::move(w.value));
  dirty_ = std::move(again);
  flight_.clear();
}

void KeyedStore::CachePut(std::string_view key, std::optional<std::string> value) {
  const size_t cost = key.size() + (value ? value->size() : 0) + kEntryOverhead;
  if (auto it = cache_index_.find(key); it != cache_index_.end()) {
    cache_used_ -= it->second->cost;
    if (cost <= cache_limit_) {
      // Updated in place (a COMMIT's Confirm of a record read before it): no
      // second lookup, no new node.
      it->second->value = std::move(value);
      it->second->cost = cost;
      cache_used_ += cost;
      cache_.splice(cache_.begin(), cache_, it->second);  // most recently used
      CacheTrim();
      return;
    }
    cache_.erase(it->second);
    cache_index_.erase(it);
  }
  if (cost > cache_limit_) return;  // larger than the whole cache: never kept
  cache_.push_front({std::string(key), std::move(value), cost});
  cache_index_.emplace(cache_.front().key, cache_.begin());
  cache_used_ += cost;
  CacheTrim();
}

void KeyedStore::CacheTrim() {
  while (cache_used_ > cache_limit_ && !cache_.empty()) {
    const CacheEntry& e = cache_.back();
    cache_used_ -= e.cost;
    cache_index_.erase(e.key);
    cache_.pop_back();
  }
}

}  // namespace lua_tasks
