// SPDX-License-Identifier: MIT
// Tests for StoreDb: schema and version, reads after writes, key listing, corrupt values.
#include "store_db.hpp"

#include <sqlite3.h>

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

TEST(StoreDbTest, ACorruptValueIsAnErrorNamingTheNameAndKey) {
  TempDir dir;
  StoreDb w(dir.Db(), StoreDb::Access::kReadWrite);
  Put(w, "game", {"player/1"});
  // Flip one bit of the value's string, inside the blob, through SQLite.
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(dir.Db().c_str(), &raw), SQLITE_OK);
  std::string value = ValueSnapshot("player/1");
  value[8] = static_cast<char>(value[8] ^ 0x04);
  sqlite3_stmt* s = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(raw, "UPDATE kv SET value = ?1", -1, &s, nullptr), SQLITE_OK);
  sqlite3_bind_blob(s, 1, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  EXPECT_EQ(sqlite3_step(s), SQLITE_DONE);
  sqlite3_finalize(s);
  sqlite3_close(raw);
  StoreDb r(dir.Db(), StoreDb::Access::kReadOnly);
  try {
    r.Get("game", kSpaceStore, "player/1");
    FAIL() << "no error";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.failure(), StoreFailure::kCorrupt);
    const std::string m = e.what();
    EXPECT_NE(m.find("store[\"player/1\"] of runtime \"game\""), std::string::npos) << m;
    EXPECT_NE(m.find("checksum mismatch"), std::string::npos) << m;
  }
  EXPECT_EQ(r.Keys("game", kSpaceStore, "", "", -1), Keys{"player/1"});  // listing reads no value
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
      EXPECT_NE(m.find("reads format version 1 only"), std::string::npos) << m;
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
  EXPECT_EQ(one("PRAGMA user_version"), "1");
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
