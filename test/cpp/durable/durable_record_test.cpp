// SPDX-License-Identifier: MIT
// Tests for durable records: keys, framing, payloads, the start and end records.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <gtest/gtest.h>
#include <lua.hpp>

#include "core/durable/durable_record.hpp"

namespace lua_tasks {
namespace {

TEST(DurableRecordTest, RecordsAreSealedAndADamagedOneIsRefused) {
  std::string r = SealRecord(RecordKind::kStep, "payload");
  std::string copy = r;
  ASSERT_TRUE(UnsealRecord(&copy));
  EXPECT_EQ(copy, std::string("S") + "payload");
  r[3] ^= 1;
  EXPECT_FALSE(UnsealRecord(&r));
  std::string tiny = "abc";
  EXPECT_FALSE(UnsealRecord(&tiny));
}

TEST(DurableRecordTest, AnIdentityGoesBeforeThePayloadAndARecordWithoutOneReadsAsBefore) {
  std::string r = SealRecord(RecordKind::kStep, "payload", std::string_view("pay"));
  ASSERT_TRUE(UnsealRecord(&r));
  std::optional<std::string_view> identity;
  EXPECT_EQ(SplitIdentity(std::string_view(r).substr(1), &identity), "payload");
  ASSERT_TRUE(identity);
  EXPECT_EQ(*identity, "pay");
  EXPECT_EQ(DescribeRecord(RecordKind::kStep, std::string_view(r).substr(1)), "tasks.step \"pay\"");
  // An anonymous JS function has an empty identity, which is not none.
  r = SealRecord(RecordKind::kCall, "v", std::string_view());
  ASSERT_TRUE(UnsealRecord(&r));
  EXPECT_EQ(SplitIdentity(std::string_view(r).substr(1), &identity), "v");
  ASSERT_TRUE(identity);
  EXPECT_EQ(DescribeRecord(RecordKind::kCall, std::string_view(r).substr(1)), "a JS call to an anonymous JS function");
  // A record of an older version: no identity, the payload as it was.
  r = SealRecord(RecordKind::kCall, "\x01rest");
  ASSERT_TRUE(UnsealRecord(&r));
  EXPECT_EQ(SplitIdentity(std::string_view(r).substr(1), &identity), "\x01rest");
  EXPECT_FALSE(identity);
  EXPECT_EQ(DescribeRecord(RecordKind::kCall, std::string_view(r).substr(1)), "a JS call");
  // A name longer than a record keeps is cut.
  r = SealRecord(RecordKind::kCall, "v", std::string(300, 'x'));
  ASSERT_TRUE(UnsealRecord(&r));
  SplitIdentity(std::string_view(r).substr(1), &identity);
  EXPECT_EQ(identity->size(), kMaxIdentity);
}

TEST(DurableRecordTest, KeysSortInRecordOrder) {
  EXPECT_EQ(RecordKey("t1", 7), "t1/0000000007");
  EXPECT_LT(RecordKey("t1", 9), RecordKey("t1", 10));
  EXPECT_LT(RecordKey("t1", 99999), RecordKey("t1", 100000));
}

TEST(DurableRecordTest, ValuesRoundTripScalarsAndTablesAndADamagedScalarRecordIsRefused) {
  lua_State* L = luaL_newstate();
  std::string payload, error;
  lua_pushnil(L);
  lua_pushboolean(L, 1);
  lua_pushinteger(L, -7);
  lua_pushnumber(L, 2.5);
  lua_pushlstring(L, "a\0b", 3);
  ASSERT_TRUE(EncodeValues(L, 5, &payload, &error)) << error;
  lua_settop(L, 0);
  ASSERT_EQ(PushValues(L, payload, &error), 5) << error;
  EXPECT_TRUE(lua_isnil(L, 1));
  EXPECT_TRUE(lua_toboolean(L, 2));
  EXPECT_TRUE(lua_isinteger(L, 3));
  EXPECT_EQ(lua_tointeger(L, 3), -7);
  EXPECT_EQ(lua_tonumber(L, 4), 2.5);
  size_t len;
  const char* s = lua_tolstring(L, 5, &len);
  EXPECT_EQ(std::string(s, len), std::string("a\0b", 3));
  lua_settop(L, 0);
  payload.pop_back();  // a torn string
  EXPECT_EQ(PushValues(L, payload, &error), -1);
  EXPECT_EQ(lua_gettop(L), 0);
  // A table goes through the snapshot codec.
  lua_newtable(L);
  lua_pushinteger(L, 42);
  lua_setfield(L, -2, "x");
  ASSERT_TRUE(EncodeValues(L, 1, &payload, &error)) << error;
  lua_settop(L, 0);
  ASSERT_EQ(PushValues(L, payload, &error), 1) << error;
  lua_getfield(L, 1, "x");
  EXPECT_EQ(lua_tointeger(L, -1), 42);
  lua_close(L);
}

TEST(DurableRecordTest, AKeyIsTheIdASlashAndTheSeqInAtLeastTenDigits) {
  // Stored keys: their form never changes (a store's journals sort by it).
  const struct {
    size_t seq;
    const char* key;
  } rows[] = {
      {0, "t/0000000000"},
      {7, "t/0000000007"},
      {1234567890, "t/1234567890"},
      {12345678901, "t/12345678901"},
      {SIZE_MAX, "t/18446744073709551615"},
  };
  for (const auto& row : rows) EXPECT_EQ(RecordKey("t", row.seq), row.key) << row.seq;
  EXPECT_EQ(RecordKey("", 3), "/0000000003");
}

TEST(DurableRecordTest, AKeysSeqReadsBackAndAKeyWithoutOneIsRefused) {
  uint64_t seq = 0;
  ASSERT_TRUE(RecordSeq(RecordKey("a/b", 1234), &seq));
  EXPECT_EQ(seq, 1234u);
  EXPECT_FALSE(RecordSeq("noslash", &seq));
  EXPECT_FALSE(RecordSeq("id/", &seq));
  EXPECT_FALSE(RecordSeq("id/12x", &seq));
}

TEST(DurableRecordTest, OpenRecordGivesKindAndPayloadAndRefusesADamagedOne) {
  std::string r = SealRecord(RecordKind::kMessage, "hello");
  RecordKind kind;
  std::string_view payload;
  ASSERT_TRUE(OpenRecord(&r, &kind, &payload));
  EXPECT_EQ(kind, RecordKind::kMessage);
  EXPECT_EQ(payload, "hello");
  std::string bad = SealRecord(RecordKind::kMessage, "hello");
  bad[1] ^= 1;
  EXPECT_FALSE(OpenRecord(&bad, &kind, &payload));
}

TEST(DurableRecordTest, AStartRecordGivesBackItsEntryKeyAndArguments) {
  lua_State* L = luaL_newstate();
  lua_pushinteger(L, 1);
  lua_pushstring(L, "two");
  std::string payload, error, entry;
  ASSERT_TRUE(EncodeStartRecord(L, "mod.fn", std::string("k1"), 1, 2, &payload, &error)) << error;
  EXPECT_EQ(lua_gettop(L), 2);  // left as it was
  lua_settop(L, 0);
  std::optional<std::string> key;
  ASSERT_EQ(PushStartRecord(L, payload, &entry, &key, &error), 2) << error;
  EXPECT_EQ(entry, "mod.fn");
  EXPECT_EQ(key, std::optional<std::string>("k1"));
  EXPECT_EQ(lua_tointeger(L, 1), 1);
  EXPECT_STREQ(lua_tostring(L, 2), "two");
  lua_settop(L, 0);
  // Without a key, and as a first record: entry, nil.
  ASSERT_TRUE(EncodeStartRecord(L, "main", std::nullopt, 1, 0, &payload, &error)) << error;
  ASSERT_EQ(PushStartRecord(L, payload, &entry, &key, &error), 0);
  EXPECT_FALSE(key.has_value());
  ASSERT_EQ(PushFirstRecord(L, RecordKind::kStart, payload, &error), 3);
  EXPECT_STREQ(lua_tostring(L, 1), "main");
  EXPECT_TRUE(lua_isnil(L, 2));
  EXPECT_TRUE(lua_isnil(L, 3));  // no label
  lua_settop(L, 0);
  // A payload of one value is not a start record.
  lua_pushstring(L, "alone");
  ASSERT_TRUE(EncodeValues(L, 1, &payload, &error));
  lua_settop(L, 0);
  EXPECT_EQ(PushStartRecord(L, payload, &entry, &key, &error), -1);
  EXPECT_EQ(PushFirstRecord(L, RecordKind::kStart, payload, &error), -1);
  EXPECT_EQ(lua_gettop(L), 0);
  EXPECT_EQ(PushFirstRecord(L, RecordKind::kYield, payload, &error), 0);
  lua_close(L);
}

TEST(DurableRecordTest, AnEndRecordKeepsStatusKeyTimeAndResultOrNilIfItCannotPersist) {
  lua_State* L = luaL_newstate();
  lua_pushinteger(L, 42);
  const std::optional<std::string> key("k");
  EndRecord end;
  end.key = &key;
  end.ended_ms = 1700000000000;
  end.result = 1;
  std::string payload, error;
  ASSERT_TRUE(EncodeEndRecord(L, end, &payload));
  EXPECT_EQ(lua_gettop(L), 1);
  lua_settop(L, 0);
  ASSERT_EQ(PushFirstRecord(L, RecordKind::kEnd, payload, &error), 5) << error;
  EXPECT_STREQ(lua_tostring(L, 1), "k");  // given as key, status, ended, result
  EXPECT_STREQ(lua_tostring(L, 2), "done");
  EXPECT_EQ(lua_tonumber(L, 3), 1700000000000.0);
  EXPECT_EQ(lua_tointeger(L, 4), 42);
  EXPECT_TRUE(lua_isnil(L, 5));  // no label
  lua_settop(L, 0);
  // A failed task keeps its error's message; a function result cannot persist.
  lua_pushstring(L, "boom");
  end.status = "failed";
  end.error = true;
  end.key = nullptr;
  ASSERT_TRUE(EncodeEndRecord(L, end, &payload));
  lua_settop(L, 0);
  ASSERT_EQ(PushFirstRecord(L, RecordKind::kEnd, payload, &error), 5);
  EXPECT_TRUE(lua_isnil(L, 1));
  EXPECT_STREQ(lua_tostring(L, 2), "failed");
  EXPECT_STREQ(lua_tostring(L, 4), "boom");
  lua_settop(L, 0);
  lua_pushcfunction(L, [](lua_State*) { return 0; });
  end.status = "done";
  end.error = false;
  ASSERT_TRUE(EncodeEndRecord(L, end, &payload));
  lua_settop(L, 0);
  ASSERT_EQ(PushFirstRecord(L, RecordKind::kEnd, payload, &error), 5);
  EXPECT_TRUE(lua_isnil(L, 4));
  lua_close(L);
}

TEST(DurableRecordTest, ALabelIsKeptByTheStartAndEndRecordsAndRecordsWithoutOneStillRead) {
  lua_State* L = luaL_newstate();
  lua_pushstring(L, "arg");
  std::string payload, error, entry;
  ASSERT_TRUE(EncodeStartRecord(L, "quest.run", std::string("k"), 1, 1, &payload, &error)) << error;
  const std::string unlabelled = payload;
  LabelStartRecord(&payload, "player 7's quest");
  lua_settop(L, 0);
  std::optional<std::string> key, label("stale");
  ASSERT_EQ(PushStartRecord(L, payload, &entry, &key, &error, &label), 1) << error;
  EXPECT_EQ(entry, "quest.run");
  EXPECT_EQ(key, std::optional<std::string>("k"));
  EXPECT_EQ(label, std::optional<std::string>("player 7's quest"));
  EXPECT_STREQ(lua_tostring(L, 1), "arg");
  lua_settop(L, 0);
  ASSERT_EQ(PushFirstRecord(L, RecordKind::kStart, payload, &error), 3);
  EXPECT_STREQ(lua_tostring(L, 3), "player 7's quest");
  lua_settop(L, 0);
  // A start record written without a label (an older one) has none.
  ASSERT_EQ(PushStartRecord(L, unlabelled, &entry, &key, &error, &label), 1);
  EXPECT_FALSE(label.has_value());
  lua_settop(L, 0);
  // A label past kMaxIdentity bytes is cut.
  payload = unlabelled;
  LabelStartRecord(&payload, std::string(300, 'x'));
  ASSERT_EQ(PushStartRecord(L, payload, &entry, &key, &error, &label), 1);
  EXPECT_EQ(label->size(), kMaxIdentity);
  lua_settop(L, 0);
  // The end record: the label after the result, a table result too.
  const std::optional<std::string> kept("player 7's quest");
  EndRecord end;
  end.label = &kept;
  end.ended_ms = 5;
  lua_newtable(L);
  end.result = 1;
  ASSERT_TRUE(EncodeEndRecord(L, end, &payload));
  lua_settop(L, 0);
  ASSERT_EQ(PushFirstRecord(L, RecordKind::kEnd, payload, &error), 5) << error;
  EXPECT_TRUE(lua_istable(L, 4));
  EXPECT_STREQ(lua_tostring(L, 5), "player 7's quest");
  lua_settop(L, 0);
  // A result that cannot persist is nil, the label still kept.
  lua_pushcfunction(L, [](lua_State*) { return 0; });
  ASSERT_TRUE(EncodeEndRecord(L, end, &payload));
  lua_settop(L, 0);
  ASSERT_EQ(PushFirstRecord(L, RecordKind::kEnd, payload, &error), 5) << error;
  EXPECT_TRUE(lua_isnil(L, 4));
  EXPECT_STREQ(lua_tostring(L, 5), "player 7's quest");
  lua_close(L);
}

}  // namespace
}  // namespace lua_tasks
