// SPDX-License-Identifier: MIT
// Tests for KeyedStore: read-your-writes over a fake reader, key listing, the cache bound, take and put back.
#include "core/store/keyed_store.hpp"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace lua_tasks {
namespace {

// The committed records, in a sorted map; counts the calls it gets.
class FakeReader : public KeyedReader {
 public:
  explicit FakeReader(std::map<std::string, std::string>* data) : data_(data) {}
  Found Get(std::string_view key, std::string* value, std::string* error) override {
    ++gets;
    if (fail) {
      *error = "disk on fire";
      return Found::kFailed;
    }
    auto it = data_->find(std::string(key));
    if (it == data_->end()) return Found::kNo;
    *value = it->second;
    return Found::kYes;
  }
  bool Keys(std::string_view prefix, std::string_view after, size_t limit, std::vector<std::string>* keys,
            std::string* error) override {
    ++lists;
    if (fail) {
      *error = "disk on fire";
      return false;
    }
    for (auto it = data_->upper_bound(std::string(after)); it != data_->end() && keys->size() < limit; ++it) {
      if (it->first.compare(0, prefix.size(), prefix) == 0) keys->push_back(it->first);
    }
    return true;
  }
  int gets = 0;
  int lists = 0;
  bool fail = false;

 private:
  std::map<std::string, std::string>* data_;
};

class KeyedStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = std::make_unique<FakeReader>(&committed);
    reader = r.get();
    store.set_reader(std::move(r));
  }
  std::string Got(std::string_view key) {
    std::string bytes, error;
    switch (store.Get(key, &bytes, &error)) {
      case KeyedStore::Read::kFound:
        return bytes;
      case KeyedStore::Read::kMissing:
        return "<none>";
      case KeyedStore::Read::kFailed:
        return "<failed: " + error + ">";
    }
    return "?";
  }
  std::vector<std::string> Keys(std::string_view prefix, std::string_view after = "", size_t limit = 100) {
    std::vector<std::string> keys;
    std::string error;
    EXPECT_TRUE(store.Keys(prefix, after, limit, &keys, &error)) << error;
    return keys;
  }
  std::map<std::string, std::string> committed;
  FakeReader* reader = nullptr;
  KeyedStore store;
};

using List = std::vector<std::string>;

TEST_F(KeyedStoreTest, ReadsItsOwnWritesBeforeTheStore) {
  committed["a"] = "old";
  EXPECT_EQ(Got("a"), "old");
  store.Set("a", "new");
  EXPECT_EQ(Got("a"), "new");
  store.Set("b", "fresh");
  EXPECT_EQ(Got("b"), "fresh");
  EXPECT_EQ(Got("c"), "<none>");
}

TEST_F(KeyedStoreTest, ADeleteHidesTheCommittedValue) {
  committed["a"] = "old";
  store.Delete("a");
  EXPECT_EQ(Got("a"), "<none>");
  EXPECT_EQ(reader->gets, 0);
  store.Set("a", "again");
  EXPECT_EQ(Got("a"), "again");
}

TEST_F(KeyedStoreTest, CachesWhatTheReaderAnsweredFoundOrNot) {
  committed["a"] = "1";
  EXPECT_EQ(Got("a"), "1");
  EXPECT_EQ(Got("a"), "1");
  EXPECT_EQ(Got("zz"), "<none>");
  EXPECT_EQ(Got("zz"), "<none>");
  EXPECT_EQ(reader->gets, 2);
}

TEST_F(KeyedStoreTest, AReaderFailureIsReportedAndNotCached) {
  reader->fail = true;
  EXPECT_EQ(Got("a"), "<failed: disk on fire>");
  reader->fail = false;
  committed["a"] = "1";
  EXPECT_EQ(Got("a"), "1");
  std::vector<std::string> keys;
  std::string error;
  reader->fail = true;
  EXPECT_FALSE(store.Keys("", "", 10, &keys, &error));
  EXPECT_EQ(error, "disk on fire");
}

TEST_F(KeyedStoreTest, KeysMergeUnconfirmedSetsAndDeletesSortedBytewise) {
  committed = {{"p:1", "x"}, {"p:3", "x"}, {"p:5", "x"}, {"q:1", "x"}};
  store.Set("p:4", "y");
  store.Set("p:\xc3\xa9", "y");  // sorts after every ASCII key, bytewise
  store.Set("p:1", "y");         // already there: listed once
  store.Delete("p:3");
  store.Delete("p:9");  // never existed
  store.Set("q:2", "y");
  EXPECT_EQ(Keys("p:"), (List{"p:1", "p:4", "p:5", "p:\xc3\xa9"}));
  EXPECT_EQ(Keys(""), (List{"p:1", "p:4", "p:5", "p:\xc3\xa9", "q:1", "q:2"}));
}

TEST_F(KeyedStoreTest, KeysHonourAfterAndLimit) {
  committed = {{"k1", ""}, {"k2", ""}, {"k3", ""}, {"k4", ""}, {"k5", ""}};
  store.Set("k25", "");
  EXPECT_EQ(Keys("k", "k2", 2), (List{"k25", "k3"}));
  EXPECT_EQ(Keys("k", "k3", 10), (List{"k4", "k5"}));
  EXPECT_EQ(Keys("k", "", 0), List{});
  EXPECT_EQ(Keys("k", "k5", 3), List{});
}

TEST_F(KeyedStoreTest, KeysPageOnWhenDeletesEmptyAFullPage) {
  for (int i = 0; i < 10; ++i) committed["k" + std::to_string(i)] = "";
  for (int i = 0; i < 6; ++i) store.Delete("k" + std::to_string(i));
  store.Set("k65", "");
  EXPECT_EQ(Keys("k", "", 3), (List{"k6", "k65", "k7"}));
  EXPECT_GE(reader->lists, 3);
  EXPECT_EQ(Keys("k", "", 100), (List{"k6", "k65", "k7", "k8", "k9"}));
}

TEST_F(KeyedStoreTest, WithoutAReaderOnlyTheUnconfirmedWritesExist) {
  KeyedStore bare;
  bare.Set("b", "1");
  bare.Set("a", "2");
  std::string bytes, error;
  EXPECT_EQ(bare.Get("a", &bytes, &error), KeyedStore::Read::kFound);
  EXPECT_EQ(bare.Get("c", &bytes, &error), KeyedStore::Read::kMissing);
  std::vector<std::string> keys;
  EXPECT_TRUE(bare.Keys("", "", 10, &keys, &error));
  EXPECT_EQ(keys, (List{"a", "b"}));
}

TEST_F(KeyedStoreTest, TheCacheStaysWithinItsBoundDroppingTheLeastRecentlyUsed) {
  store.set_cache_limit(3 * (KeyedStore::kEntryOverhead + 2 + 100));
  for (const char* k : {"k1", "k2", "k3", "k4"}) committed[k] = std::string(100, 'v');
  committed["big"] = std::string(10000, 'v');
  Got("k1");
  Got("k2");
  Got("k3");
  EXPECT_EQ(store.cache_entries(), 3u);
  Got("k1");  // now the most recent: k2 goes next
  Got("k4");
  EXPECT_EQ(store.cache_entries(), 3u);
  EXPECT_LE(store.cache_bytes(), store.cache_limit());
  const int before = reader->gets;
  Got("k1");
  Got("k3");
  Got("k4");
  EXPECT_EQ(reader->gets, before);
  Got("k2");
  EXPECT_EQ(reader->gets, before + 1);
  Got("big");  // larger than the cache: read, not kept
  Got("big");
  EXPECT_EQ(reader->gets, before + 3);
  EXPECT_LE(store.cache_bytes(), store.cache_limit());
}

TEST_F(KeyedStoreTest, TakeEmptiesTheDirtyMapInFirstWriteOrder) {
  store.Set("b", "1");
  store.Set("a", "2");
  store.Delete("c");
  store.Set("b", "3");  // keeps its first place
  const std::vector<KeyedWrite> batch = store.Take();
  ASSERT_EQ(batch.size(), 3u);
  EXPECT_EQ(batch[0].key, "b");
  EXPECT_EQ(*batch[0].value, "3");
  EXPECT_EQ(batch[1].key, "a");
  EXPECT_EQ(batch[2].key, "c");
  EXPECT_FALSE(batch[2].value.has_value());
  EXPECT_EQ(store.dirty_count(), 0u);
  EXPECT_TRUE(store.in_flight());
  // Still read while in flight, and listed.
  EXPECT_EQ(Got("b"), "3");
  EXPECT_EQ(Keys(""), (List{"a", "b"}));
  EXPECT_EQ(reader->gets, 0);
}

TEST_F(KeyedStoreTest, AConfirmedBatchIsServedFromTheCache) {
  store.Set("a", "1");
  store.Delete("gone");
  store.Take();
  committed["a"] = "1";  // the store applied it
  store.Confirm();
  EXPECT_FALSE(store.in_flight());
  EXPECT_EQ(Got("a"), "1");
  EXPECT_EQ(Got("gone"), "<none>");
  EXPECT_EQ(reader->gets, 0);
  EXPECT_EQ(store.Take().size(), 0u);
}

TEST_F(KeyedStoreTest, PutBackRestoresOnlyKeysNotWrittenSinceTheTake) {
  store.Set("a", "1");
  store.Set("b", "1");
  store.Set("c", "1");
  std::vector<KeyedWrite> batch = store.Take();
  store.Set("b", "2");  // newer than the batch: wins
  store.Delete("c");
  store.Set("d", "2");
  store.PutBack(std::move(batch));
  EXPECT_FALSE(store.in_flight());
  EXPECT_EQ(Got("a"), "1");
  EXPECT_EQ(Got("b"), "2");
  EXPECT_EQ(Got("c"), "<none>");
  const std::vector<KeyedWrite> again = store.Take();
  ASSERT_EQ(again.size(), 4u);
  EXPECT_EQ(again[0].key, "a");  // the put-back ones first, then the newer
  EXPECT_EQ(again[1].key, "b");
  EXPECT_EQ(*again[1].value, "2");
  EXPECT_EQ(again[2].key, "c");
  EXPECT_FALSE(again[2].value.has_value());
  EXPECT_EQ(again[3].key, "d");
}

TEST_F(KeyedStoreTest, ANewReaderDropsTheCache) {
  committed["a"] = "1";
  Got("a");
  EXPECT_EQ(store.cache_entries(), 1u);
  store.set_reader(nullptr);
  EXPECT_EQ(store.cache_entries(), 0u);
  EXPECT_EQ(store.cache_bytes(), 0u);
}

}  // namespace
}  // namespace lua_tasks
