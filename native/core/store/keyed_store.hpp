// SPDX-License-Identifier: MIT
// KeyedStore: a runtime's tasks.store records: unflushed writes, writes in flight, a cache, the store's reader.
//
// Reads layer, newest first: the dirty map (set or deleted since the last
// take), the writes in flight (taken for a batch not yet confirmed durable),
// the cache of committed bytes, then the store's reader. A value is kept as
// the codec's bytes everywhere (copy semantics: tasks.store.get decodes a
// fresh copy each call), so what a COMMIT writes is exactly what was set.
//
// One batch is in flight at a time (the runtime's CommitQueue writes one at a
// time): Take moves the dirty map into flight, then Confirm (durable: the
// flight goes to the cache) or PutBack (failed: every key of the flight that
// was not set or deleted since the take is dirty again) ends it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace lua_tasks {

// The committed records as the store has them: the embedder's (the addon
// calls the JS store's reader). Called on the runtime's thread, while Lua
// code waits for the answer.
class KeyedReader {
 public:
  virtual ~KeyedReader() = default;
  enum class Found : uint8_t { kYes, kNo, kFailed };
  // The committed bytes of `key` into *value (kYes), kNo if none, kFailed
  // with *error (a sentence fragment, no trailing period).
  virtual Found Get(std::string_view key, std::string* value, std::string* error) = 0;
  // Up to `limit` committed keys that start with `prefix` and sort after
  // `after` bytewise ("" = from the first), ascending, into *keys. False with
  // *error on failure.
  virtual bool Keys(std::string_view prefix, std::string_view after, size_t limit, std::vector<std::string>* keys,
                    std::string* error) = 0;
};

// One buffered write: value is the codec's bytes, or none for a delete.
struct KeyedWrite {
  std::string key;
  std::optional<std::string> value;
};

class KeyedStore {
 public:
  static constexpr size_t kDefaultCacheBytes = size_t{16} << 20;  // storeCacheBytes' default
  // What one cache entry costs beyond its key and bytes (list node, hash slot).
  static constexpr size_t kEntryOverhead = 64;

  explicit KeyedStore(size_t cache_bytes = kDefaultCacheBytes) : cache_limit_(cache_bytes) {}
  KeyedStore(const KeyedStore&) = delete;
  KeyedStore& operator=(const KeyedStore&) = delete;

  // The store's reader, or null (the runtime has no keyed store). Replacing
  // it drops the cache: it held another store's bytes.
  void set_reader(std::unique_ptr<KeyedReader> reader);
  KeyedReader* reader() const { return reader_.get(); }
  void set_cache_limit(size_t bytes);
  size_t cache_limit() const { return cache_limit_; }
  size_t cache_bytes() const { return cache_used_; }
  size_t cache_entries() const { return cache_index_.size(); }

  // ---- Writes (buffered until a COMMIT takes them) ----
  void Set(std::string_view key, std::string bytes);
  void Delete(std::string_view key);
  // Keys set or deleted since the last take.
  size_t dirty_count() const { return dirty_.size(); }
  // Bytes (keys and values) written and not yet durable: dirty and in
  // flight. What maxPendingBytes bounds (persist_limits.hpp).
  size_t pending_bytes() const { return dirty_.bytes + flight_.bytes; }
  // What `key`'s dirty write holds now (0 if none): a new Set replaces it.
  size_t dirty_bytes_of(std::string_view key) const {
    const KeyedWrite* w = dirty_.Find(key);
    return w != nullptr ? WriteBytes(*w) : 0;
  }

  // ---- Reads (read-your-writes) ----
  enum class Read : uint8_t { kFound, kMissing, kFailed };
  // The newest bytes of `key` into *bytes: dirty, flight, cache, else the
  // reader (whose answer is cached). kFailed with *error from the reader.
  Read Get(std::string_view key, std::string* bytes, std::string* error);
  // Up to `limit` keys starting with `prefix` after `after`, sorted bytewise:
  // the reader's keys with the unconfirmed sets added and deletes removed.
  bool Keys(std::string_view prefix, std::string_view after, size_t limit, std::vector<std::string>* keys,
            std::string* error);

  // ---- The batch ----
  // Moves the dirty map, in the order its keys were first written, into
  // flight and returns a copy of it. Requires no batch in flight.
  std::vector<KeyedWrite> Take();
  bool in_flight() const { return !flight_.empty(); }
  // The batch in flight is durable: its values become the cache's.
  void Confirm();
  // The batch failed: each of `writes` whose key was not written since the
  // take is dirty again (ahead of the newer ones, in its order), and the
  // flight ends.
  void PutBack(std::vector<KeyedWrite> writes);

 private:
  // Insertion-ordered map: the batch order is deterministic.
  static size_t WriteBytes(const KeyedWrite& w);
  struct Ordered {
    std::vector<KeyedWrite> entries;
    std::unordered_map<std::string, size_t> index;  // key -> position in entries
    size_t bytes = 0;                               // WriteBytes of every entry
    const KeyedWrite* Find(std::string_view key) const;
    void Put(std::string_view key, std::optional<std::string> value);
    bool empty() const { return entries.empty(); }
    size_t size() const { return entries.size(); }
    void clear() {
      entries.clear();
      index.clear();
      bytes = 0;
    }
  };
  // A committed record: its bytes, or none (known absent).
  struct CacheEntry {
    std::string key;
    std::optional<std::string> value;
    size_t cost;
  };
  const KeyedWrite* Unconfirmed(std::string_view key) const;
  void CachePut(std::string_view key, std::optional<std::string> value);
  void CacheTrim();

  std::unique_ptr<KeyedReader> reader_;
  Ordered dirty_;
  Ordered flight_;
  std::list<CacheEntry> cache_;                                                        // most recently used first
  std::unordered_map<std::string_view, std::list<CacheEntry>::iterator> cache_index_;  // views cache_'s keys
  size_t cache_used_ = 0;
  size_t cache_limit_;
};

}  // namespace lua_tasks
