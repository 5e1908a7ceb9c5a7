// SPDX-License-Identifier: MIT
// StoreDb: one connection to the SQLite database of a store directory (docs/persistence.md).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/store/sqlite_handles.hpp"
#include "core/store/store_write.hpp"

namespace lua_tasks {

// The database's file name in the store directory (plus its -wal and -shm).
inline constexpr char kStoreDbFile[] = "lua-tasks.sqlite";
// The schema's version, in PRAGMA user_version. A database of a higher one
// was written by a newer lua-tasks and is refused; a lower one is upgraded
// when the writer opens it (1 -> 2: kv.sum and the commits counter; 2 -> 3:
// space 4 keeps durable tasks' index, which versions before 3 would leave
// stale: a name's index is written at its first open by version 3).
inline constexpr int kStoreFormatVersion = 3;

// Why an operation failed.
enum class StoreFailure : uint8_t {
  kIo,       // SQLite or the OS failed (I/O, full disk, permissions, busy)
  kCorrupt,  // the database or a value in it does not read (checksum, format, version)
};

class StoreError : public std::runtime_error {
 public:
  StoreError(StoreFailure failure, int sqlite_code, int sys_errno, const std::string& message)
      : std::runtime_error(message), failure_(failure), sqlite_code_(sqlite_code), sys_errno_(sys_errno) {}
  StoreFailure failure() const { return failure_; }
  // The extended SQLite result code (0 when SQLite did not fail).
  int sqlite_code() const { return sqlite_code_; }
  // The OS errno behind an I/O failure, when SQLite knows it (else 0).
  int sys_errno() const { return sys_errno_; }

 private:
  StoreFailure failure_;
  int sqlite_code_;
  int sys_errno_;
};

// Everything one COMMIT of one runtime makes durable, applied all or nothing.
struct StoreBatch {
  std::string name;
  int64_t token = 0;  // the owner's fencing token; 0: not fenced (a v1 save without a lease)
  int64_t seq = 0;
  std::optional<std::string> state;  // the tasks.state snapshot, when it changed
  // Or the snapshot's bytes held by the caller, unchanged and alive until
  // the batch's outcome is reported: the addon lends a JS Buffer's, so a
  // snapshot of megabytes is not copied on the loop thread.
  std::optional<std::string_view> borrowed_state;
  std::vector<StoreWrite> writes;
  // Durable tasks' records, applied after `writes`: handed over from the
  // scheduler without a copy, and shared with the runtime, which puts them
  // back if the batch fails.
  std::shared_ptr<const std::vector<StoreWrite>> journal;
};

// A connection to <dir>/lua-tasks.sqlite. The read-write one (the writer's)
// creates the file and the schema; the read-only one serves keyed reads on
// the loop thread. Both refuse a database of a higher format version. WAL
// journal, synchronous=FULL (a COMMIT that returned survives a power cut),
// and a busy timeout so that several stores on one directory (Workers,
// processes) wait for each other instead of failing. Not thread-safe: one
// thread uses a StoreDb at a time. Every method throws StoreError.
class StoreDb {
 public:
  enum class Access { kReadWrite, kReadOnly };
  StoreDb(const std::string& path, Access access);
  StoreDb(const StoreDb&) = delete;
  StoreDb& operator=(const StoreDb&) = delete;

  const std::string& path() const { return path_; }

  // Transactions (read-write only). Begin takes the write lock at once.
  void Begin();
  // Counts the write transaction in progress (inside it) and returns the
  // database's new count: what StoreMark compares with.
  int64_t CountCommit();
  // The count of write transactions the database holds.
  int64_t Commits();
  // Why the database or its -wal is no longer the file this connection
  // writes (the directory was removed, a file deleted or replaced), or
  // nullopt when both are still in place. Two stat()s.
  std::optional<std::string> Unlinked();
  // Copies the WAL into the database and truncates it, when no other
  // connection is reading (else as much as it can). Throws on failure.
  void Checkpoint();
  void Commit();
  void Rollback() noexcept;
  void Savepoint();
  void ReleaseSavepoint();
  void RollbackSavepoint() noexcept;

  // The fencing token recorded for `name`, if any.
  std::optional<int64_t> OwnerToken(std::string_view name);
  // Records `token` as the owner's of `name` (acquire did it).
  void Claim(std::string_view name, int64_t token);
  // Writes the batch's state and keyed writes; no token check (the writer
  // does it, under the batch's savepoint).
  void Apply(const StoreBatch& batch);
  // One write of a batch.
  void Put(const std::string& name, const StoreWrite& w);
  // Imports a whole snapshot (migration), unless the name has one already.
  // Returns whether it was written.
  bool ImportSnapshot(std::string_view name, std::string_view bytes);

  // The tasks.state snapshot of `name` as stored (the runtime's decoder checks it).
  std::optional<std::string> LoadSnapshot(std::string_view name);
  // A keyed value. Its row checksum (over the name, space, key and value)
  // and, in space 1, the value's own are verified; a miss verifies the keys
  // of the rows beside where the key would be, so a damaged key neither
  // answers for another key nor makes its record vanish silently. A failure
  // names the name and key.
  std::optional<std::string> Get(std::string_view name, int space, std::string_view key);
  // Keys of `name` in `space` that start with `prefix` and sort after `after`
  // (bytewise; empty: from the first), at most `limit` (negative: all).
  // Each key listed is verified against its row's key checksum.
  std::vector<std::string> Keys(std::string_view name, int space, std::string_view prefix, std::string_view after,
                                int64_t limit);
  // The runtime names the database knows (a snapshot, a keyed value or an
  // owner's token), in bytewise order after `after`, that match `glob`
  // (SQLite's GLOB: the store contract lets only `*` through as a
  // wildcard), at most `limit` (negative: all).
  std::vector<std::string> Names(std::string_view glob, std::string_view after, int64_t limit);
  // Every row of `name` in spaces `first`..`last`, by space then key, handed
  // to `visit(space, key, value)` in one statement (so one read snapshot)
  // without a lookup a row. Each row is verified against its checksum; a
  // damaged one fails the scan, naming it.
  void Scan(std::string_view name, int first, int last,
            const std::function<void(int space, std::string_view key, std::string_view value)>& visit);
  // The same for the keys from `low` (included) to `high` (excluded) only.
  void ScanRange(std::string_view name, int first, int last, std::string_view low, std::string_view high,
                 const std::function<void(int space, std::string_view key, std::string_view value)>& visit);

 private:
  void Exec(const char* sql);
  SqliteStatement Prepare(const char* sql);
  [[noreturn]] void Fail(int rc, const std::string& what);
  void Step(SqliteStatement& s, const std::string& what);

  std::string path_;
  SqliteConnection db_;
  SqliteStatement begin_, commit_, rollback_, savepoint_, release_, rollback_to_;
  SqliteStatement owner_get_, owner_set_, snap_put_, snap_import_, snap_get_, kv_put_, kv_del_, kv_get_;
  SqliteStatement keys_bounded_, keys_open_, next_row_, prev_row_, scan_, scan_range_;
  SqliteStatement count_commit_, commits_;
  // The files this connection opened: (device, inode) of the database, and
  // of its -wal once it exists (0, 0: not seen yet).
  uint64_t db_dev_ = 0, db_ino_ = 0, wal_dev_ = 0, wal_ino_ = 0;
  void CheckNeighbors(std::string_view name, int space, std::string_view key);
  void VisitRows(SqliteStatement& s, std::string_view name,
                 const std::function<void(int space, std::string_view key, std::string_view value)>& visit);
};

// A keyed row's checksum, kv.sum: the high 32 bits are the CRC-32C of the
// row's (name, space, key), the low 32 bits that CRC continued over the
// value. Rows written by format 1 have none (NULL): only a space 1 value's
// own CRC checks them.
int64_t RowSum(std::string_view name, int space, std::string_view key, std::string_view value);
uint32_t KeySum(std::string_view name, int space, std::string_view key);

// Whether `bytes` is a checksummed state codec snapshot whose CRC32C holds;
// when not, *why says what is wrong (lowercase).
bool SnapshotChecks(std::string_view bytes, std::string* why);

}  // namespace lua_tasks
