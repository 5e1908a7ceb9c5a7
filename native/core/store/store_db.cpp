// SPDX-License-Identifier: MIT
// StoreDb: one connection to the SQLite database of a store directory (docs/persistence.md).
//
// Schema, version 3 (PRAGMA user_version; 3 differs from 2 in what space 4 holds only):
//   snapshots(name PRIMARY KEY, seq, bytes)            tasks.state, whole, as the codec wrote it
//   kv(name, space, key, sum, value) PRIMARY KEY (name, space, key), WITHOUT ROWID
//                                                      keyed values, each a codec snapshot, and
//                                                      the row's checksum (RowSum; NULL in rows
//                                                      format 1 wrote)
//   owners(name PRIMARY KEY, token)                    the fencing token of the name's owner
//   commits(id = 1, count)                             write transactions so far (StoreMark)
// Keys are TEXT compared with the BINARY collation (memcmp): bytewise order.
#include "core/store/store_db.hpp"

#include <sys/stat.h>

#include <bit>
#include <cerrno>
#include <cstring>

#include "core/base/crc32c.hpp"
#include "core/codec/state_codec.hpp"

namespace lua_tasks {

namespace {

constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS snapshots(name TEXT PRIMARY KEY, seq INTEGER NOT NULL, bytes BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS kv(name TEXT NOT NULL, space INTEGER NOT NULL, key TEXT NOT NULL, sum INTEGER,
                              value BLOB NOT NULL, PRIMARY KEY (name, space, key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS owners(name TEXT PRIMARY KEY, token INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS commits(id INTEGER PRIMARY KEY CHECK (id = 1), count INTEGER NOT NULL);
INSERT OR IGNORE INTO commits(id, count) VALUES(1, 0);
)sql";
// Format 1 -> 2. Its rows keep sum NULL: checking them by the value's own
// CRC, as format 1 did, is all the upgrade can promise (a checksum computed
// now would bless a key already damaged), and a million rows would make
// this open slow. A row gets its sum when it is next written.
constexpr char kUpgradeFrom1[] = "ALTER TABLE kv ADD COLUMN sum INTEGER;";

// How long a connection waits for another one's write lock (another store
// object on the directory, a Worker, a process) before it fails SQLITE_BUSY.
constexpr int kBusyTimeoutMs = 10000;

bool IsCorruption(int rc) {
  const int primary = rc & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB;
}

// The smallest string above every string that starts with `prefix`, or
// nullopt when there is none (a prefix of 0xFF bytes only, or empty).
std::optional<std::string> PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
  if (end.empty()) return std::nullopt;
  end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

uint32_t Le32(uint32_t v) {
  if constexpr (std::endian::native == std::endian::big) return __builtin_bswap32(v);
  return v;
}

// A key's length-prefixed parts, so ("ab", "c") and ("a", "bc") differ.
uint32_t AddPart(uint32_t crc, std::string_view part) {
  const uint32_t n = Le32(static_cast<uint32_t>(part.size()));
  crc = Crc32c::Update(crc, std::string_view(reinterpret_cast<const char*>(&n), 4));
  return Crc32c::Update(crc, part);
}

std::optional<int64_t> ColumnSum(SqliteStatement& s, int col) {
  if (sqlite3_column_type(s.get(), col) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_int64(s.get(), col);
}

std::string Quote(std::string_view key) {
  return "store[\"" + std::string(key) + "\"]";
}

void BindText(SqliteStatement& s, int i, std::string_view v) {
  sqlite3_bind_text(s.get(), i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
}
void BindBlob(SqliteStatement& s, int i, std::string_view v) {
  // A zero-length blob must still be a blob, not NULL: sqlite3_bind_zeroblob.
  if (v.empty()) {
    sqlite3_bind_zeroblob(s.get(), i, 0);
  } else {
    sqlite3_bind_blob64(s.get(), i, v.data(), v.size(), SQLITE_STATIC);
  }
}
std::string ColumnBytes(SqliteStatement& s, int col) {
  const void* p = sqlite3_column_blob(s.get(), col);
  const int n = sqlite3_column_bytes(s.get(), col);
  return p == nullptr ? std::string() : std::string(static_cast<const char*>(p), static_cast<size_t>(n));
}

}  // namespace

uint32_t KeySum(std::string_view name, int space, std::string_view key) {
  const uint32_t sp = Le32(static_cast<uint32_t>(space));
  uint32_t crc = AddPart(0, name);
  crc = Crc32c::Update(crc, std::string_view(reinterpret_cast<const char*>(&sp), 4));
  return AddPart(crc, key);
}

int64_t RowSum(std::string_view name, int space, std::string_view key, std::string_view value) {
  const uint32_t k = KeySum(name, space, key);
  const uint32_t all = Crc32c::Update(k, value);
  return static_cast<int64_t>((static_cast<uint64_t>(k) << 32) | all);
}

bool SnapshotChecks(std::string_view bytes, std::string* why) {
  return SnapshotFrameIntact(bytes, why);
}

StoreDb::StoreDb(const std::string& path, Access access) : path_(path) {
  sqlite3* raw = nullptr;
  const int flags = access == Access::kReadWrite ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY;
  // NOMUTEX: one thread uses a connection at a time (see the class comment).
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  db_ = SqliteConnection(raw);  // owned even when the open failed
  if (rc != SQLITE_OK) Fail(rc, "open");
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, kBusyTimeoutMs);
  // The version first: a newer schema is not ours to touch, not even to
  // switch its journal mode.
  int version = 0;
  {
    SqliteStatement v = Prepare("PRAGMA user_version");
    SqliteStatement::Use use(v);
    const int step = sqlite3_step(v.get());
    if (step != SQLITE_ROW) Fail(step, "read the format version");
    version = sqlite3_column_int(v.get(), 0);
  }
  if (version > kStoreFormatVersion) {
    throw StoreError(StoreFailure::kCorrupt, 0, 0,
                     "The store database " + path + " has format version " + std::to_string(version) +
                         ", written by a newer lua-tasks; this one reads format version " +
                         std::to_string(kStoreFormatVersion) + " only. Open it with that newer lua-tasks.");
  }
  if (access == Access::kReadWrite) {
    Exec("PRAGMA journal_mode=WAL");
    Exec("PRAGMA synchronous=FULL");
    // A batch's savepoint keeps the pages it changes in a sub-journal: in a
    // temp file by default, two pwrites a page. In memory, W13 (100 batches
    // a transaction) goes from ~17,000 to ~22,000 COMMITs/s here.
    Exec("PRAGMA temp_store=MEMORY");
    if (version < kStoreFormatVersion) {
      Exec("BEGIN IMMEDIATE");
      try {
        if (version == 1) Exec(kUpgradeFrom1);
        Exec(kSchema);
        Exec(("PRAGMA user_version=" + std::to_string(kStoreFormatVersion)).c_str());
        Exec("COMMIT");
      } catch (...) {
        sqlite3_exec(raw, "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
      }
    }
    begin_ = Prepare("BEGIN IMMEDIATE");
    commit_ = Prepare("COMMIT");
    rollback_ = Prepare("ROLLBACK");
    savepoint_ = Prepare("SAVEPOINT batch");
    release_ = Prepare("RELEASE batch");
    rollback_to_ = Prepare("ROLLBACK TO batch");
    owner_set_ = Prepare(
        "INSERT INTO owners(name, token) VALUES(?1, ?2) ON CONFLICT(name) DO UPDATE SET token = excluded.token");
    snap_put_ = Prepare(
        "INSERT INTO snapshots(name, seq, bytes) VALUES(?1, ?2, ?3) "
        "ON CONFLICT(name) DO UPDATE SET seq = excluded.seq, bytes = excluded.bytes");
    snap_import_ = Prepare("INSERT INTO snapshots(name, seq, bytes) VALUES(?1, 0, ?2) ON CONFLICT(name) DO NOTHING");
    kv_put_ = Prepare(
        "INSERT INTO kv(name, space, key, value, sum) VALUES(?1, ?2, ?3, ?4, ?5) "
        "ON CONFLICT(name, space, key) DO UPDATE SET value = excluded.value, sum = excluded.sum");
    kv_del_ = Prepare("DELETE FROM kv WHERE name = ?1 AND space = ?2 AND key = ?3");
    count_commit_ = Prepare("UPDATE commits SET count = count + 1 WHERE id = 1 RETURNING count");
  } else if (version < kStoreFormatVersion) {
    throw StoreError(StoreFailure::kIo, 0, 0,
                     "The store database " + path + " has no schema yet (open it for writing first).");
  }
  owner_get_ = Prepare("SELECT token FROM owners WHERE name = ?1");
  snap_get_ = Prepare("SELECT bytes FROM snapshots WHERE name = ?1");
  kv_get_ = Prepare("SELECT value, sum FROM kv WHERE name = ?1 AND space = ?2 AND key = ?3");
  keys_bounded_ = Prepare(
      "SELECT key, sum FROM kv WHERE name = ?1 AND space = ?2 AND key >= ?3 AND key > ?4 AND key < ?5 ORDER BY key "
      "LIMIT ?6");
  keys_open_ = Prepare(
      "SELECT key, sum FROM kv WHERE name = ?1 AND space = ?2 AND key >= ?3 AND key > ?4 ORDER BY key LIMIT ?6");
  // The rows a seek for (name, space, key) lands between, whatever their
  // name: a bit flipped in a stored key leaves its row where the key it had
  // sorted, so it is one of these two.
  next_row_ = Prepare(
      "SELECT name, space, key, sum FROM kv WHERE (name, space, key) >= (?1, ?2, ?3) ORDER BY name, space, key "
      "LIMIT 1");
  prev_row_ = Prepare(
      "SELECT name, space, key, sum FROM kv WHERE (name, space, key) < (?1, ?2, ?3) "
      "ORDER BY name DESC, space DESC, key DESC LIMIT 1");
  commits_ = Prepare("SELECT count FROM commits WHERE id = 1");
  scan_ =
      Prepare("SELECT space, key, value, sum FROM kv WHERE name = ?1 AND space BETWEEN ?2 AND ?3 ORDER BY space, key");
  scan_range_ = Prepare(
      "SELECT space, key, value, sum FROM kv WHERE name = ?1 AND space BETWEEN ?2 AND ?3 AND key >= ?4 AND key < ?5 "
      "ORDER BY space, key");
  struct stat st;
  if (stat(path_.c_str(), &st) == 0) {
    db_dev_ = st.st_dev;
    db_ino_ = st.st_ino;
  }
}

void StoreDb::Fail(int rc, const std::string& what) {
  sqlite3* db = db_.get();
  const char* msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  const StoreFailure failure = IsCorruption(rc) ? StoreFailure::kCorrupt : StoreFailure::kIo;
  // The OS's errno says more than SQLite's code where the OS failed.
  const int primary = rc & 0xff;
  const bool os_failed =
      primary == SQLITE_IOERR || primary == SQLITE_FULL || primary == SQLITE_CANTOPEN || primary == SQLITE_READONLY;
  const int sys = os_failed && db != nullptr ? sqlite3_system_errno(db) : 0;
  throw StoreError(failure, rc, sys, "The store database " + path_ + " failed to " + what + ": " + msg);
}

void StoreDb::Exec(const char* sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db_.get(), sql, nullptr, nullptr, &err);
  sqlite3_free(err);  // errmsg says the same
  if (rc != SQLITE_OK) Fail(rc, "run its setup");
}

SqliteStatement StoreDb::Prepare(const char* sql) {
  sqlite3_stmt* s = nullptr;
  const int rc = sqlite3_prepare_v3(db_.get(), sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr);
  SqliteStatement out(s);
  if (rc != SQLITE_OK) Fail(rc, "prepare a statement");
  return out;
}

void StoreDb::Step(SqliteStatement& s, const std::string& what) {
  const int rc = sqlite3_step(s.get());
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) Fail(rc, what);
}

void StoreDb::Begin() {
  SqliteStatement::Use use(begin_);
  Step(begin_, "begin a transaction");
}

int64_t StoreDb::CountCommit() {
  SqliteStatement::Use use(count_commit_);
  const int rc = sqlite3_step(count_commit_.get());
  if (rc != SQLITE_ROW) Fail(rc, "count the transaction");
  return sqlite3_column_int64(count_commit_.get(), 0);
}

int64_t StoreDb::Commits() {
  SqliteStatement::Use use(commits_);
  const int rc = sqlite3_step(commits_.get());
  if (rc == SQLITE_DONE) return 0;
  if (rc != SQLITE_ROW) Fail(rc, "read its count of transactions");
  return sqlite3_column_int64(commits_.get(), 0);
}

std::optional<std::string> StoreDb::Unlinked() {
  struct stat st;
  if (db_ino_ != 0) {
    if (stat(path_.c_str(), &st) != 0) return "its database file " + path_ + " is gone (" + std::strerror(errno) + ")";
    if (st.st_dev != db_dev_ || st.st_ino != db_ino_) return path_ + " is no longer the file this store opened";
  }
  // SQLite keeps the -wal while a connection is open (this one), so a
  // different file there, or none, means someone else removed it.
  const std::string wal = path_ + "-wal";
  if (stat(wal.c_str(), &st) != 0) {
    if (wal_ino_ == 0) return std::nullopt;  // not created yet
    return "its write-ahead log " + wal + " is gone (" + std::strerror(errno) + ")";
  }
  if (wal_ino_ == 0) {
    wal_dev_ = st.st_dev;
    wal_ino_ = st.st_ino;
  } else if (st.st_dev != wal_dev_ || st.st_ino != wal_ino_) {
    return wal + " is no longer the file this store writes";
  }
  return std::nullopt;
}

void StoreDb::Checkpoint() {
  // No waiting for another process's readers: what they still read stays in
  // the -wal, and the next checkpoint takes it.
  sqlite3_busy_timeout(db_.get(), 0);
  const int rc = sqlite3_wal_checkpoint_v2(db_.get(), nullptr, SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr);
  sqlite3_busy_timeout(db_.get(), kBusyTimeoutMs);
  if (rc != SQLITE_OK && (rc & 0xff) != SQLITE_BUSY) Fail(rc, "checkpoint its write-ahead log");
}

void StoreDb::Commit() {
  SqliteStatement::Use use(commit_);
  Step(commit_, "commit");
}

void StoreDb::Rollback() noexcept {
  if (sqlite3_get_autocommit(db_.get()) != 0) return;  // SQLite rolled back already
  SqliteStatement::Use use(rollback_);
  sqlite3_step(rollback_.get());
}

void StoreDb::Savepoint() {
  SqliteStatement::Use use(savepoint_);
  Step(savepoint_, "open a savepoint");
}

void StoreDb::ReleaseSavepoint() {
  SqliteStatement::Use use(release_);
  Step(release_, "release a savepoint");
}

void StoreDb::RollbackSavepoint() noexcept {
  {
    SqliteStatement::Use use(rollback_to_);
    sqlite3_step(rollback_to_.get());
  }
  SqliteStatement::Use use(release_);
  sqlite3_step(release_.get());
}

std::optional<int64_t> StoreDb::OwnerToken(std::string_view name) {
  SqliteStatement::Use use(owner_get_);
  BindText(owner_get_, 1, name);
  const int rc = sqlite3_step(owner_get_.get());
  if (rc == SQLITE_ROW) return sqlite3_column_int64(owner_get_.get(), 0);
  if (rc != SQLITE_DONE) Fail(rc, "read the owner of \"" + std::string(name) + "\"");
  return std::nullopt;
}

void StoreDb::Claim(std::string_view name, int64_t token) {
  SqliteStatement::Use use(owner_set_);
  BindText(owner_set_, 1, name);
  sqlite3_bind_int64(owner_set_.get(), 2, token);
  Step(owner_set_, "record the owner of \"" + std::string(name) + "\"");
}

void StoreDb::Apply(const StoreBatch& batch) {
  const std::optional<std::string_view> state =
      batch.state ? std::optional<std::string_view>(*batch.state) : batch.borrowed_state;
  if (state) {
    SqliteStatement::Use use(snap_put_);
    BindText(snap_put_, 1, batch.name);
    sqlite3_bind_int64(snap_put_.get(), 2, batch.seq);
    BindBlob(snap_put_, 3, *state);
    Step(snap_put_, "write the state of \"" + batch.name + "\"");
  }
  for (const StoreWrite& w : batch.writes) Put(batch.name, w);
  if (batch.journal) {
    for (const StoreWrite& w : *batch.journal) Put(batch.name, w);
  }
}

void StoreDb::Put(const std::string& name, const StoreWrite& w) {
  SqliteStatement& s = w.value ? kv_put_ : kv_del_;
  SqliteStatement::Use use(s);
  BindText(s, 1, name);
  sqlite3_bind_int(s.get(), 2, w.space);
  BindText(s, 3, w.key);
  if (w.value) {
    BindBlob(s, 4, *w.value);
    sqlite3_bind_int64(s.get(), 5, RowSum(name, w.space, w.key, *w.value));
  }
  // The message is made only on failure: a batch of 100,000 records is common.
  const int rc = sqlite3_step(s.get());
  if (rc != SQLITE_DONE) Fail(rc, "write store[\"" + w.key + "\"] of \"" + name + "\"");
}

bool StoreDb::ImportSnapshot(std::string_view name, std::string_view bytes) {
  SqliteStatement::Use use(snap_import_);
  BindText(snap_import_, 1, name);
  BindBlob(snap_import_, 2, bytes);
  Step(snap_import_, "import the snapshot of \"" + std::string(name) + "\"");
  return sqlite3_changes(db_.get()) > 0;
}

std::optional<std::string> StoreDb::LoadSnapshot(std::string_view name) {
  SqliteStatement::Use use(snap_get_);
  BindText(snap_get_, 1, name);
  const int rc = sqlite3_step(snap_get_.get());
  if (rc == SQLITE_ROW) return ColumnBytes(snap_get_, 0);
  if (rc != SQLITE_DONE) Fail(rc, "read the state of \"" + std::string(name) + "\"");
  return std::nullopt;
}

std::optional<std::string> StoreDb::Get(std::string_view name, int space, std::string_view key) {
  std::string value;
  std::optional<int64_t> sum;
  {
    SqliteStatement::Use use(kv_get_);
    BindText(kv_get_, 1, name);
    sqlite3_bind_int(kv_get_.get(), 2, space);
    BindText(kv_get_, 3, key);
    const int rc = sqlite3_step(kv_get_.get());
    if (rc == SQLITE_DONE) {
      CheckNeighbors(name, space, key);
      return std::nullopt;
    }
    if (rc != SQLITE_ROW) Fail(rc, "read " + Quote(key) + " of \"" + std::string(name) + "\"");
    value = ColumnBytes(kv_get_, 0);
    sum = ColumnSum(kv_get_, 1);
  }
  std::string why;
  bool ok = true;
  if (sum && static_cast<uint32_t>(*sum) != static_cast<uint32_t>(RowSum(name, space, key, value))) {
    ok = false;
    why = "its row checksum, over the name, key and value, does not match: the key or the value was damaged";
  }
  // tasks.store's values are codec snapshots with a CRC of their own; other
  // spaces' records carry checks of their own too (durable_journal.hpp).
  if (ok && space == kSpaceStore) ok = SnapshotChecks(value, &why);
  if (!ok) {
    throw StoreError(StoreFailure::kCorrupt, 0, 0,
                     "The value of " + Quote(key) + " of runtime \"" + std::string(name) + "\" is corrupt (" + why +
                         ") in " + path_ + ".");
  }
  return value;
}

void StoreDb::Scan(std::string_view name, int first, int last,
                   const std::function<void(int space, std::string_view key, std::string_view value)>& visit) {
  SqliteStatement::Use use(scan_);
  BindText(scan_, 1, name);
  sqlite3_bind_int(scan_.get(), 2, first);
  sqlite3_bind_int(scan_.get(), 3, last);
  VisitRows(scan_, name, visit);
}

void StoreDb::ScanRange(std::string_view name, int first, int last, std::string_view low, std::string_view high,
                        const std::function<void(int space, std::string_view key, std::string_view value)>& visit) {
  SqliteStatement::Use use(scan_range_);
  BindText(scan_range_, 1, name);
  sqlite3_bind_int(scan_range_.get(), 2, first);
  sqlite3_bind_int(scan_range_.get(), 3, last);
  BindText(scan_range_, 4, low);
  BindText(scan_range_, 5, high);
  VisitRows(scan_range_, name, visit);
}

void StoreDb::VisitRows(SqliteStatement& s, std::string_view name,
                        const std::function<void(int space, std::string_view key, std::string_view value)>& visit) {
  for (;;) {
    const int rc = sqlite3_step(s.get());
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) Fail(rc, "read the records of \"" + std::string(name) + "\"");
    const int space = sqlite3_column_int(s.get(), 0);
    const auto* k = reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 1));
    const std::string_view key(k == nullptr ? "" : k, static_cast<size_t>(sqlite3_column_bytes(s.get(), 1)));
    const auto* v = static_cast<const char*>(sqlite3_column_blob(s.get(), 2));
    const std::string_view value(v == nullptr ? "" : v, static_cast<size_t>(sqlite3_column_bytes(s.get(), 2)));
    const std::optional<int64_t> sum = ColumnSum(s, 3);
    if (sum && *sum != RowSum(name, space, key, value)) {
      throw StoreError(StoreFailure::kCorrupt, 0, 0,
                       "The record " + Quote(key) + " (space " + std::to_string(space) + ") of runtime \"" +
                           std::string(name) +
                           "\" is corrupt (its row checksum, over the name, key and value, does "
                           "not match) in " +
                           path_ + ". The database is damaged: restore the directory from a backup.");
    }
    visit(space, key, value);
  }
}

void StoreDb::CheckNeighbors(std::string_view name, int space, std::string_view key) {
  for (SqliteStatement* s : {&next_row_, &prev_row_}) {
    SqliteStatement::Use use(*s);
    BindText(*s, 1, name);
    sqlite3_bind_int(s->get(), 2, space);
    BindText(*s, 3, key);
    const int rc = sqlite3_step(s->get());
    if (rc == SQLITE_DONE) continue;
    if (rc != SQLITE_ROW) Fail(rc, "read " + Quote(key) + " of \"" + std::string(name) + "\"");
    const std::optional<int64_t> sum = ColumnSum(*s, 3);
    if (!sum) continue;  // a format 1 row: no key checksum
    const std::string n = ColumnBytes(*s, 0);
    const int sp = sqlite3_column_int(s->get(), 1);
    const std::string k = ColumnBytes(*s, 2);
    if (static_cast<uint32_t>(static_cast<uint64_t>(*sum) >> 32) != KeySum(n, sp, k)) {
      throw StoreError(StoreFailure::kCorrupt, 0, 0,
                       "Cannot tell whether " + Quote(key) + " of runtime \"" + std::string(name) +
                           "\" exists: the record stored where it would be has a damaged key (it reads as " + Quote(k) +
                           " of \"" + n + "\", space " + std::to_string(sp) +
                           ", and its row checksum does not match) in " + path_ +
                           ". The database is damaged: restore the directory from a backup.");
    }
  }
}

std::vector<std::string> StoreDb::Names(std::string_view glob, std::string_view after, int64_t limit) {
  // Made at each call: an operator's listing, not a runtime's path.
  SqliteStatement s = Prepare(
      "SELECT name FROM snapshots WHERE name > ?1 AND name GLOB ?2 "
      "UNION SELECT DISTINCT name FROM kv WHERE name > ?1 AND name GLOB ?2 "
      "UNION SELECT name FROM owners WHERE name > ?1 AND name GLOB ?2 "
      "ORDER BY name LIMIT ?3");
  BindText(s, 1, after);
  BindText(s, 2, glob);
  sqlite3_bind_int64(s.get(), 3, limit < 0 ? -1 : limit);
  std::vector<std::string> out;
  for (;;) {
    const int rc = sqlite3_step(s.get());
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) Fail(rc, "list the runtime names");
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 0));
    out.emplace_back(p == nullptr ? "" : p, static_cast<size_t>(sqlite3_column_bytes(s.get(), 0)));
  }
  return out;
}

std::vector<std::string> StoreDb::Keys(std::string_view name, int space, std::string_view prefix,
                                       std::string_view after, int64_t limit) {
  const std::optional<std::string> end = PrefixEnd(prefix);
  SqliteStatement& s = end ? keys_bounded_ : keys_open_;
  SqliteStatement::Use use(s);
  BindText(s, 1, name);
  sqlite3_bind_int(s.get(), 2, space);
  // The range starts at the larger of the two lower bounds: SQLite seeks the
  // index by ?3 and only filters by ?4, so paging through a million keys with
  // `after` scanned from the prefix on every page (quadratic).
  BindText(s, 3, after > prefix ? after : prefix);
  BindText(s, 4, after);
  if (end) BindText(s, 5, *end);
  sqlite3_bind_int64(s.get(), 6, limit < 0 ? -1 : limit);
  std::vector<std::string> out;
  for (;;) {
    const int rc = sqlite3_step(s.get());
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) Fail(rc, "list the keys of \"" + std::string(name) + "\"");
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 0));
    std::string key(p == nullptr ? "" : p, static_cast<size_t>(sqlite3_column_bytes(s.get(), 0)));
    const std::optional<int64_t> sum = ColumnSum(s, 1);
    if (sum && static_cast<uint32_t>(static_cast<uint64_t>(*sum) >> 32) != KeySum(name, space, key)) {
      throw StoreError(StoreFailure::kCorrupt, 0, 0,
                       "The keys of runtime \"" + std::string(name) + "\" cannot be listed: " + Quote(key) +
                           " has a damaged key (its row checksum does not match) in " + path_ +
                           ". The database is damaged: restore the directory from a backup.");
    }
    out.push_back(std::move(key));
  }
  return out;
}

}  // namespace lua_tasks
