// SPDX-License-Identifier: MIT
// PersistLimits: the bytes a script may make its runtime encode, hold for writing and persist.
//
// Every route by which Lua code makes the runtime persist bytes (tasks.state,
// tasks.store values, durable journal records, inbox messages, end records)
// encodes through the state codec under the one value limit here, and is
// refused at the Lua call that would pass a limit, with ERR_STORE_LIMIT
// (docs/security.md#persistence-routes). The embedder sets them
// (lib/runtime/options.js resolves the defaults from memoryLimit); the store adds
// what it declares it takes (its `limits`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/codec/state_codec.hpp"

namespace lua_tasks {

struct PersistLimits {
  // maxValueBytes: one encoded value (a tasks.store value, the tasks.state
  // snapshot, a journal record, a message), and the store's own maximum.
  size_t value_bytes = kMaxStateBytes;
  // maxPendingBytes: tasks.store writes not yet durable (set and not yet
  // committed, or in flight), keys included.
  size_t pending_bytes = SIZE_MAX;
  // maxJournalBytes: one durable task's journal, its records' payloads
  // added up over one run (tasks.continue_as_new starts a new run).
  size_t journal_bytes = SIZE_MAX;
  // The store's key rules (its `limits`): the longest key, and whether a key
  // may hold a NUL byte (PostgreSQL's text cannot).
  size_t key_bytes = 512;
  bool key_nul = true;

  // What the store declares it takes narrows these (SIZE_MAX: not declared):
  // its largest value, key and batch (a batch carries the pending writes).
  void Narrow(size_t store_value, size_t store_key, size_t store_batch, bool store_forbids_nul) {
    value_bytes = value_bytes < store_value ? value_bytes : store_value;
    key_bytes = key_bytes < store_key ? key_bytes : store_key;
    pending_bytes = pending_bytes < store_batch ? pending_bytes : store_batch;
    key_nul = key_nul && !store_forbids_nul;
  }

  // The codec guard that encodes one value under value_bytes (at most
  // `room` more when less is left), asking `host` to stop.
  CodecGuard Encoding(LuaHost* host, size_t room = SIZE_MAX) const {
    CodecGuard g;
    g.max_bytes = value_bytes < room ? value_bytes : room;
    g.stop = host;
    return g;
  }
};

// The codec guard of a decode done on a script's behalf (tasks.store.get,
// a restore, a replay): under host's memoryLimit, asking it to stop.
CodecGuard Decoding(LuaHost* host);

// "1 MiB", "512 KiB", "300 bytes": a limit as a message shows it.
std::string ByteCount(size_t n);

// The sentence a refused encoding ends with: which option bounds it and how
// to raise it. `option` is the limit's option name ("maxValueBytes").
std::string LimitAdvice(std::string_view option, size_t limit);

}  // namespace lua_tasks
