// SPDX-License-Identifier: MIT
// Tests for the state codec on corrupt, truncated and foreign input, and its checksum.
#include "core/codec/state_codec.hpp"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/base/crc32c.hpp"

#include "codec/state_codec_fixture.hpp"

namespace lua_tasks {
namespace {

using namespace state_codec_testing;  // the fixture (state_codec_fixture.hpp)

// ---------------------------------------------------------------------------
// Corrupt, truncated and foreign input

TEST_F(StateCodec, RefusesEveryTruncation) {
  Do(kRandomState);
  const std::string good = Encode("v = random_state(3) v.s = 'string' v.f = 1.5 v.again = v");
  ASSERT_GT(good.size(), 40u);
  // Version 3 by its checksum; version 2, which has none, by its structure.
  for (const std::string& bytes : {good, Unchecked(good)}) {
    for (size_t n = 0; n < bytes.size(); ++n) {
      SCOPED_TRACE("truncated at " + std::to_string(n) + " of " + std::to_string(bytes.size()));
      DecodeError(std::string_view(bytes).substr(0, n));
    }
  }
}

TEST_F(StateCodec, RefusesForeignBuffers) {
  EXPECT_EQ(DecodeError(""), "not a lua-tasks state snapshot (bad magic)");
  EXPECT_EQ(DecodeError("XXXX\x02"), "not a lua-tasks state snapshot (bad magic)");
  EXPECT_EQ(DecodeError("{\"json\": true}"), "not a lua-tasks state snapshot (bad magic)");
  EXPECT_EQ(DecodeError("LTS"), "corrupt state snapshot: truncated header");
  EXPECT_EQ(DecodeError(Snapshot("\x02", 1)),
            "state snapshot version 1 is not supported (this build reads versions 2 to 4)");
  EXPECT_EQ(DecodeError(Snapshot("\x02", 5)),
            "state snapshot version 5 is not supported (this build reads versions 2 to 4)");
  EXPECT_EQ(DecodeError(Snapshot("\x02", 4)), "corrupt state snapshot: truncated checksum");
  EXPECT_EQ(DecodeError(Snapshot("\x02", 3)), "corrupt state snapshot: truncated checksum");
  EXPECT_EQ(DecodeError(Snapshot(std::string("\x02\x00\x00\x00\x00", 5), 3)),
            "corrupt state snapshot: checksum mismatch");
}

struct CorruptRow {
  std::string body;   // after the header
  const char* error;  // after "corrupt state snapshot: "
};

TEST_F(StateCodec, RefusesCorruptStructure) {
  const std::string nan_key = std::string("\x04\x00\x00\x00\x00\x00\x00\xf8\x7f", 9);
  const CorruptRow rows[] = {
      {"", "truncated value at byte 5"},
      {std::string("\x02\x00", 2), "bytes after the value at byte 6"},
      {"\x0b", "unknown value tag 11 at byte 5"},
      {"\x09\x7f", "reference to a string not yet seen at byte 7"},
      {"\xff", "unknown value tag 255 at byte 5"},
      {"\x03\x01\x02", "truncated number at byte 6"},
      {"\x05\x05"
       "abc",
       "string length past the end at byte 7"},
      {"\x05\xff\xff\xff\xff\xff\xff\xff\xff\x3f", "string length past the end at byte 15"},
      {"\x05\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", "malformed length at byte 16"},
      {"\x05\x80", "truncated length at byte 7"},
      {TableHeader(0xffffffff), "table count past the end at byte 14"},
      {TableHeader(3) + "\x02\x02", "table count past the end at byte 14"},
      {TableHeader(1, 2) + "\x02\x02", "array size larger than the table at byte 14"},
      {"\x06\x01\x00", "truncated table header at byte 6"},
      {std::string("\x07\x00", 2), "reference to a table not yet seen at byte 7"},
      {TableHeader(1) + std::string("\x02\x07\x00", 3), "reference to a table not marked shared at byte 17"},
      {TableHeader(1) + "\x02\x07\x01", "reference to a table not yet seen at byte 17"},
      {TableHeader(1) + std::string("\x00\x02", 2), "nil table key at byte 16"},
      {TableHeader(1) + nan_key + "\x02", "nan table key at byte 24"},
  };
  for (const CorruptRow& row : rows) {
    SCOPED_TRACE(row.error);
    EXPECT_EQ(DecodeError(Snapshot(row.body)), std::string("corrupt state snapshot: ") + row.error);
  }
}

TEST_F(StateCodec, AcceptsAHandBuiltSharedTable) {
  // { [true] = <self> } with the table marked shared: the format as documented.
  const std::string bytes = Snapshot(TableHeader(1, 0, '\x08') + std::string("\x02\x07\x00", 3));
  LuaHost::HostSection section(host.get(), L);
  std::string error;
  ASSERT_TRUE(DecodeState(L, bytes, &error)) << error;
  lua_setglobal(L, "back");
  EXPECT_TRUE(Eval("rawequal(back[true], back)"));
}

TEST_F(StateCodec, RefusesCountsThatOnlyAddUpPastTheEnd) {
  // 100 nested tables, each claiming 1,000 pairs: each alone fits in the
  // bytes left, together they do not. Refused before they are allocated.
  std::string body;
  for (int i = 0; i < 100; ++i) body += TableHeader(1000) + "\x02";
  body += std::string(2100, '\x00');
  const std::string error = DecodeError(Snapshot(body));
  EXPECT_NE(error.find("table count past the end"), std::string::npos) << error;
}

TEST_F(StateCodec, RefusesToDecodePastTheDepthLimit) {
  auto nested = [](int depth) {
    std::string body;
    for (int i = 1; i < depth; ++i) body += TableHeader(1) + "\x02";
    body += TableHeader(0);
    return Snapshot(body);
  };
  {
    LuaHost::HostSection section(host.get(), L);
    std::string error;
    ASSERT_TRUE(DecodeState(L, nested(kMaxStateDepth), &error)) << error;
    lua_pop(L, 1);
  }
  const std::string error = DecodeError(nested(kMaxStateDepth + 1));
  EXPECT_NE(error.find("nested more than 200 tables deep"), std::string::npos) << error;
}

// Version 2, which has no checksum: the structure checks alone keep a
// damaged snapshot from crashing or allocating past its size.
TEST_F(StateCodec, SurvivesFlippedBytes) {
  Do(kRandomState);
  const std::string good = Unchecked(Encode("v = random_state(11) v.again = v"));
  LuaHost::HostSection section(host.get(), L);
  std::mt19937 rng(7);
  int refused = 0, decoded = 0;
  for (int i = 0; i < 5000; ++i) {  // refused, or decoded into something that re-encodes
    std::string bad = good;
    for (int flips = 1 + static_cast<int>(rng() % 3); flips > 0; --flips) {
      bad[5 + rng() % (bad.size() - 5)] ^= static_cast<char>(1 + rng() % 255);
    }
    std::string error, again;
    if (DecodeState(L, bad, &error)) {
      ++decoded;
      EXPECT_TRUE(EncodeState(L, -1, &again, &error)) << error;
      lua_pop(L, 1);
    } else {
      ++refused;
      EXPECT_EQ(error.rfind("corrupt state snapshot: ", 0), 0u) << error;
    }
    ASSERT_EQ(lua_gettop(L), base);
  }
  EXPECT_GT(refused, 0);
}

// ---------------------------------------------------------------------------
// The checksum

TEST_F(StateCodec, WritesVersion4WithTheChecksumOfEverythingBefore) {
  const std::string bytes = Encode("v = { a = 1 }");
  ASSERT_GT(bytes.size(), 9u);
  EXPECT_EQ(bytes.substr(0, 5), std::string("LTST\x04", 5));
  const std::string_view body = std::string_view(bytes).substr(0, bytes.size() - 4);
  const uint32_t crc = Crc32c::Update(0, body);
  std::string trailer;
  for (int i = 0; i < 4; ++i) trailer += static_cast<char>(crc >> (8 * i));
  EXPECT_EQ(bytes.substr(bytes.size() - 4), trailer);
}

TEST_F(StateCodec, ReadsVersion2SnapshotsWithoutAChecksum) {
  // As 0.1.0 wrote them: the same stream, version byte 2, nothing after.
  Do(kRandomState);
  for (int seed = 1; seed <= 50; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::string v3 = Encode("v = random_state(" + std::to_string(seed) + ")");
    LuaHost::HostSection section(host.get(), L);
    std::string error;
    ASSERT_TRUE(DecodeState(L, Unchecked(v3), &error)) << error;
    lua_setglobal(L, "back");
    ASSERT_TRUE(Eval("same(v, back)"));
  }
  EXPECT_EQ(DecodeError(Checked(TableHeader(0)) + "x"), "corrupt state snapshot: checksum mismatch");
}

// A few hundred bytes with nested tables, a shared table, a cycle, strings
// long and short, every scalar kind.
constexpr const char* kSmallState = R"(
  local shared = { tag = "shared", list = { 1, 2, 3 } }
  v = { players = { { name = "ann", score = 1.5, tags = { "a", "b" } },
                    { name = "bob", score = -2, friend = shared } },
        shared = shared, flags = { [true] = false, [0.25] = "quarter" },
        text = ("lorem ipsum "):rep(6), bytes = "\0\1\255", big = math.mininteger }
  v.self = v
  shared.back = v.players)";

TEST_F(StateCodec, RefusesEverySingleBitFlip) {
  const std::string good = Encode(kSmallState);
  ASSERT_GT(good.size(), 200u);
  ASSERT_LT(good.size(), 1000u);
  int flips = 0;
  for (size_t byte = 0; byte < good.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      SCOPED_TRACE("bit " + std::to_string(bit) + " of byte " + std::to_string(byte));
      std::string bad = good;
      bad[byte] ^= static_cast<char>(1 << bit);
      LuaHost::HostSection section(host.get(), L);
      std::string error;
      CodecFailure failure = CodecFailure::kNone;
      ASSERT_FALSE(DecodeState(L, bad, &error, &failure));
      EXPECT_EQ(failure, CodecFailure::kCorrupt) << error;
      ASSERT_EQ(lua_gettop(L), base);
      ++flips;
    }
  }
  EXPECT_EQ(flips, static_cast<int>(8 * good.size()));
}

TEST_F(StateCodec, ClassifiesEveryDecodeFailureAsCorrupt) {
  const std::string rows[] = {"",
                              "XXXX\x03",
                              "LTS",
                              Snapshot("\x02", 9),
                              Snapshot("\x02", 3),
                              Checked("") + "",
                              Checked("\x0b"),
                              Checked(TableHeader(3) + "\x02\x02")};
  for (const std::string& bytes : rows) {
    LuaHost::HostSection section(host.get(), L);
    std::string error;
    CodecFailure failure = CodecFailure::kNone;
    EXPECT_FALSE(DecodeState(L, bytes, &error, &failure));
    EXPECT_EQ(failure, CodecFailure::kCorrupt) << error;
  }
}

}  // namespace
}  // namespace lua_tasks
