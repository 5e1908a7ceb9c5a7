// SPDX-License-Identifier: MIT
// Tests for StoreDb: schema and version, reads after writes, key listing, corrupt values and keys, unlinked files.
#include "core/store/store_db.hpp"

#include <sqlite3.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "store_test_dir.hpp"

namespace lua_tasks {
namespace {

using Keys = std::vector<std::string>;

void Put(StoreDb& db, const std::string& name, const Keys& keys) {
  StoreBatch b;
  b.name = name;
  for (const std::string& k : keys) b.writes.push_back({kSpaceStore, k, ValueSnapshot(k)});
  db.Begin();
  db.Apply(b);
  db.Commit();
}

TEST(StoreDbTest, ReadsSeeCommittedWritesOnly) {
  TempDir dir;
  StoreDb w(dir.Db(), StoreDb::Access::kReadWrite);
  StoreDb r(dir.Db(), StoreDb::Access::kReadOnly);
  StoreBatch b;
  b.name = "a";
  b.state = "snapshot";
  b.writes.push_back({kSpaceStore, "k", ValueSnapshot("v")});
  w.Begin();
  w.Apply(b);
  EXPECT_EQ(r.Get("a", kSpaceStore, "k"), std::nullopt);  // not committed yet
  w.Commit();
  EXPECT_EQ(r.Get("a", kSpaceStore, "k"), ValueSnapshot("v"));
  EXPECT_EQ(w.LoadSnapshot("a"), "snapshot");
  EXPECT_EQ(r.LoadSnapshot("b"), std::nullopt);
  EXPECT_EQ(r.Get("b", kSpaceStore, "k"), std::nullopt);  // names are separate
  b.state.reset();
  b.writes = {{kSpaceStore, "k", std::nullopt}};
  w.Begin();
  w.Apply(b);
  w.Commit();
  EXPECT_EQ(r.Get("a", kSpaceStore, "k"), std::nullopt);
  EXPECT_EQ(r.LoadSnapshot("a"), "snapshot");  // a batch without state leaves it
}

TEST(StoreDbTest, ABorrowedStateIsWrittenAsAnOwnedOne) {
  TempDir dir;
  StoreDb w(dir.Db(), StoreDb::Access::kReadWrite);
  const std::string lent = "the caller's snapshot bytes";
  StoreBatch b;
  b.name = "a";
  b.borrowed_state = std::string_view(lent);
  w.Begin();
  w.Apply(b);
  w.Commit();
  EXPECT_EQ(w.LoadSnapshot("a"), lent);
  b.state = "owned";  // an owned state wins over a borrowed one
  w.Begin();
  w.Apply(b);
  w.Commit();
  EXPECT_EQ(w.LoadSnapshot("a"), "owned");
}

TEST(StoreDbTest, KeysInBytewiseOrderWithPrefixAfterAndLimit) {
  TempDir dir;
  StoreDb w(dir.Db(), StoreDb::Access::kReadWrite);
  Put(w, "a", {"b", "a/2", "a/10", "a/1", "\xc3\xa9", "Z", "a", "a\xff", "a/"});
  Put(w, "other", {"a/3"});
  StoreDb r(dir.Db(), StoreDb::Access::kReadOnly);
  EXPECT_EQ(r.Keys("a", kSpaceStore, "", "", -1),
            (Keys{"Z", "a", "a/", "a/1", "a/10", "a/2", "a\xff", "b", "\xc3\xa9"}));
  EXPECT_EQ(r.Keys("a", kSpaceStore, "a/", "", -1), (Keys{"a/", "a/1", "a/10", "a/2"}));
  EXPECT_EQ(r.Keys("a", kSpaceStore, "a/", "a/1", -1), (Keys{"a/10", "a/2"}));
  EXPECT_EQ(r.Keys("a", kSpaceStore, "a/", "", 2), (Keys{"a/", "a/1"}));
  EXPECT_EQ(r.Keys("a", kSpaceStore, "a", "a/2", -1), (Keys{"a\xff"}));
  EXPECT_EQ(r.Keys("a", kSpaceStore, "", "a\xff", 1), (Keys{"b"}));
  EXPECT_EQ(r.Keys("a", kSpaceStore, "\xc3", "", -1), (Keys{"\xc3\xa9"}));
  EXPECT_EQ(r.Keys("a", kSpaceStore, "a/", "zzz", -1), Keys{});
  EXPECT_EQ(r.Keys("a", kSpaceStore, "", "", 0), Keys{});
  EXPECT_EQ(r.Keys("a", 2, "", "", -1), Keys{});  // another space
}

// Runs `sql` on a connection of its own (the damage a test makes).
void Exec(const std::string& db, const std::string& sql) {
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(raw);
}

// The message of the StoreError `fn` throws, which must be kCorrupt.
template <typename Fn>
std::string Corrupt(Fn fn) {
  try {
    fn();
  } catch (const StoreError& e) {
    EXPECT_EQ(e.failure(), StoreFailure::kCorrupt) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(StoreDbTest, ACorruptValueIsAnErrorNamingTheNameAndKey) {
  // Rows: the row checksum catches it; a format 1 row (no sum), the value's own CRC.
  for (const char* clear_sum : {"", ", sum = NULL"}) {
    TempDir dir;
    StoreDb w(dir.Db(), StoreDb::Access::kReadWrite);
    Put(w, "game", {"player/1"});
    // Flip one bit of the value's string, inside the blob, through SQLite.
    std::string value = ValueSnapshot("player/1");
    value[8] = static_cast<char>(value[8] ^ 0x04);
    std::string hex;
    for (unsigned char c : value) hex += "0123456789abcdef"[c >> 4], hex += "0123456789abcdef"[c & 15];
    Exec(dir.Db(), "UPDATE kv SET value = x'" + hex + "'" + clear_sum);
    StoreDb r(dir.Db(), StoreDb::Access::kReadOnly);
    const std::string m = Corrupt([&] { r.Get("game", kSpaceStore, "player/1"); });
    EXPECT_NE(m.find("store[\"player/1\"] of runtime \"game\""), std::string::npos) << m;
    EXPECT_NE(m.find(*clear_sum ? "checksum mismatch" : "row checksum"), std::string::npos) << m;
    EXPECT_EQ(r.Keys("game", kSpaceStore, "", "", -1), Keys{"player/1"});  // listing reads no value
  }
}

// Regression: a bit flipped in a stored key made its record
// vanish, and answer for the key it became.
TEST(StoreDbTest, ADamagedKeyNeitherAnswersForAnotherKeyNorVanishes) {
  TempDir dir;
  StoreDb w(dir.Db(), StoreDb::Access::kReadWrite);
  Put(w, "game", {"player/1", "player/3", "player/5"});
  Put(w, "other", {"x"});
  // '1' (0x31) -> '0' (0x30): the row stays between its neighbours, as a bit
  // flipped in the file leaves it.
  Exec(dir.Db(), "UPDATE kv SET key = 'player/0' WHERE key = 'player/1'");
  StoreDb r(dir.Db(), StoreDb::Access::kReadOnly);
  std::string m = Corrupt([&] { r.Get("game", kSpaceStore, "player/0"); });
  EXPECT_NE(m.find("store[\"player/0\"] of runtime \"game\" is corrupt (its row checksum"), std::string::npos) << m;
  m = Corrupt([&] { r.Get("game", kSpaceStore, "player/1"); });
  EXPECT_NE(m.find("Cannot tell whether store[\"player/1\"] of runtime \"game\" exists"), std::string::npos) << m;
  EXPECT_NE(m.find("it reads as store[\"player/0\"] of \"game\", space 1"), std::string::npos) << m;
  m = Corrupt([&] { r.Keys("game", kSpaceStore, "", "", -1); });
  EXPECT_NE(m.find("store[\"player/0\"] has a damaged key"), std::string::npos) << m;
  // Damage is reported near it only: the rest reads.
  EXPECT_EQ(r.Get("game", kSpaceStore, "player/5"), ValueSnapshot("player/5"));
  EXPECT_EQ(r.Get("game", kSpaceStore, "player/9"), std::nullopt);
  EXPECT_EQ(r.Get("other", kSpaceStore, "x"), ValueSnapshot("x"));
}

TEST(StoreDbTest, AScanVisitsEveryRowOfTheSpacesInOrderAndRefusesADamagedOne) {
  TempDir dir;
  StoreDb w(dir.Db(), StoreDb::Access::kReadWrite);
  StoreBatch b;
  b.name = "game";
  for (int space : {3, 2, 1, 4}) {
    for (const char* k : {"t/2", "t/1"}) b.writes.push_back({space, k, std::string(k) + std::to_string(space)});
  }
  w.Begin();
  w.Apply(b);
  w.Commit();
  Put(w, "other", {"t/0"});
  StoreDb r(dir.Db(), StoreDb::Access::kReadOnly);
  std::vector<std::string> seen;
  r.Scan("game", 2, 3, [&](int space, std::string_view key, std::string_view value) {
    seen.push_back(std::to_string(space) + " " + std::string(key) + " " + std::string(value));
  });
  EXPECT_EQ(seen, (Keys{"2 t/1 t/12", "2 t/2 t/22", "3 t/1 t/13", "3 t/2 t/23"}));
  Exec(dir.Db(), "UPDATE kv SET value = x'00' WHERE space = 3 AND key = 't/2'");
  seen.clear();
  const std::string m = Corrupt(
      [&] { r.Scan("game", 2, 3, [&](int, std::string_view key, std::string_view) { seen.emplace_back(key); }); });
  EXPECT_NE(m.find("store[\"t/2\"] (space 3) of runtime \"game\" is corrupt"), std::string::npos) << m;
  EXPECT_EQ(seen.size(), 3u);  // the rows before it were read
}

TEST(StoreDbTest, ADamagedNameOrSpaceIsCaughtToo) {
  for (const char* damage : {"UPDATE kv SET name = 'gamd'", "UPDATE kv SET space = 3"}) {
    TempDir dir;
    StoreDb w(dir.Db(), StoreDb::Access::kReadWrite);
    Put(w, "game", {"player/1"});
    Exec(dir.Db(), damage);
    StoreDb r(dir.Db(), StoreDb::Access::kReadOnly);
    const std::string m = Corrupt([&] { r.Get("game", kSpaceStore, "player/1"); });
    EXPECT_NE(m.find("has a damaged key"), std::string::npos) << damage << ": " << m;
  }
}

TEST(StoreDbTest, AFormat1DatabaseIsUpgradedAndItsRowsStillRead) {
  TempDir dir;
  Exec(dir.Db(),
       "CREATE TABLE snapshots(name TEXT PRIMARY KEY, seq INTEGER NOT NULL, bytes BLOB NOT NULL);"
       "CREATE TABLE kv(name TEXT NOT NULL, space INTEGER NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,"
       " PRIMARY KEY (name, space, key)) WITHOUT ROWID;"
       "CREATE TABLE owners(name TEXT PRIMARY KEY, token INTEGER NOT NULL);"
       "PRAGMA user_version = 1;");
  {
    StoreDb w(dir.Db(), StoreDb::Access::kReadWrite);  // the upgrade
  }
  // An old row: no sum. It reads, checked by the value's own CRC.
  const std::string v = ValueSnapshot("old");
  std::string hex;
  for (unsigned char c : v) hex += "0123456789abcdef"[c >> 4], hex += "0123456789abcdef"[c & 15];
  Exec(dir.Db(), "INSERT INTO kv(name, space, key, value) VALUES('a', 1, 'k', x'" + hex + "')");
  StoreDb w(dir.Db(), StoreDb::Access::kReadWrite);
  EXPECT_EQ(w.Commits(), 0);
  Put(w, "a", {"new"});
  StoreDb r(dir.Db(), StoreDb::Access::kReadOnly);
  EXPECT_EQ(r.Get("a", kSpaceStore, "k"), v);
  EXPECT_EQ(r.Get("a", kSpaceStore, "new"), ValueSnapshot("new"));
  EXPECT_EQ(r.Keys("a", kSpaceStore, "", "", -1), (Keys{"k", "new"}));
  EXPECT_EQ(r.Get("a", kSpaceStore, "j"), std::nullopt);  // a miss beside an old row
}

TEST(StoreDbTest, EachWriteTransactionIsCounted) {
  TempDir dir;
  StoreDb w(dir.Db(), StoreDb::Access::kReadWrite);
  EXPECT_EQ(w.Commits(), 0);
  w.Begin();
  EXPECT_EQ(w.CountCommit(), 1);
  w.Commit();
  w.Begin();
  EXPECT_EQ(w.CountCommit(), 2);
  w.Rollback();  // a rolled back transaction is not
  StoreDb r(dir.Db(), StoreDb::Access::kReadOnly);
  EXPECT_EQ(r.Commits(), 1);
}

// Regression: with the directory removed, COMMITs were
// acknowledged into unlinked files.
TEST(StoreDbTest, UnlinkedFilesAreNoticed) {
  for (const char* gone : {"lua-tasks.sqlite", "lua-tasks.sqlite-wal", ""}) {
    TempDir dir;
    StoreDb w(dir.Db(), StoreDb::Access::kReadWrite);
    Put(w, "a", {"k"});
    EXPECT_EQ(w.Unlinked(), std::nullopt);
    const std::filesystem::path d = std::filesystem::path(dir.Db()).parent_path();
    if (*gone) {
      std::filesystem::remove(d / gone);
    } else {
      std::filesystem::remove_all(d);
    }
    const std::optional<std::string> why = w.Unlinked();
    ASSERT_TRUE(why.has_value()) << gone;
    EXPECT_NE(why->find(" is gone ("), std::string::npos) << *why;
  }
}

TEST(StoreDbTest, SnapshotChecksRefusesDamagedAndForeignBytes) {
  std::string why;
  EXPECT_TRUE(SnapshotChecks(ValueSnapshot("hello"), &why));
  std::string bad = ValueSnapshot("hello");
  for (size_t bit = 0; bit < bad.size() * 8; bit++) {
    std::string c = bad;
    c[bit / 8] = static_cast<char>(c[bit / 8] ^ (1 << (bit % 8)));
    EXPECT_FALSE(SnapshotChecks(c, &why)) << "bit " << bit;
  }
  EXPECT_FALSE(SnapshotChecks("", &why));
  EXPECT_FALSE(SnapshotChecks("LTST\x02xxxxxx", &why));
  EXPECT_EQ(why, "value snapshot version 2 is not supported");
}

TEST(StoreDbTest, ANewerFormatVersionIsRefusedNamingBothNumbers) {
  TempDir dir;
  { StoreDb w(dir.Db(), StoreDb::Access::kReadWrite); }
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(dir.Db().c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "PRAGMA user_version = 7", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(raw);
  for (auto access : {StoreDb::Access::kReadWrite, StoreDb::Access::kReadOnly}) {
    try {
      StoreDb db(dir.Db(), access);
      FAIL() << "opened";
    } catch (const StoreError& e) {
      EXPECT_EQ(e.failure(), StoreFailure::kCorrupt);
      const std::string m = e.what();
      EXPECT_NE(m.find("format version 7"), std::string::npos) << m;
      EXPECT_NE(m.find("reads format version 3 only"), std::string::npos) << m;
    }
  }
}

TEST(StoreDbTest, SchemaVersionAndJournalMode) {
  TempDir dir;
  { StoreDb w(dir.Db(), StoreDb::Access::kReadWrite); }
  { StoreDb again(dir.Db(), StoreDb::Access::kReadWrite); }  // reopening keeps it
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(dir.Db().c_str(), &raw), SQLITE_OK);
  auto one = [&](const char* sql) {
    sqlite3_stmt* s = nullptr;
    sqlite3_prepare_v2(raw, sql, -1, &s, nullptr);
    sqlite3_step(s);
    std::string v = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    return v;
  };
  EXPECT_EQ(one("PRAGMA user_version"), "3");
  EXPECT_EQ(one("PRAGMA journal_mode"), "wal");
  sqlite3_close(raw);
}

TEST(StoreDbTest, ImportWritesOnlyWhenTheNameHasNoSnapshot) {
  TempDir dir;
  StoreDb w(dir.Db(), StoreDb::Access::kReadWrite);
  w.Begin();
  EXPECT_TRUE(w.ImportSnapshot("a", "old"));
  EXPECT_FALSE(w.ImportSnapshot("a", "older"));
  w.Commit();
  EXPECT_EQ(w.LoadSnapshot("a"), "old");
}

TEST(StoreDbTest, AnEmptySnapshotStaysAnEmptyBlob) {
  TempDir dir;
  StoreDb w(dir.Db(), StoreDb::Access::kReadWrite);
  StoreBatch b;
  b.name = "e";
  b.state = "";
  w.Begin();
  w.Apply(b);
  w.Commit();
  EXPECT_EQ(w.LoadSnapshot("e"), "");
}

}  // namespace
}  // namespace lua_tasks
