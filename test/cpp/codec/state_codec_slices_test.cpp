// SPDX-License-Identifier: MIT
// Tests for the state codec in slices: the same bytes and refusals as one shot, the clock reads, the collector.
#include "core/codec/state_codec.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_clocks.hpp"

#include "codec/state_codec_fixture.hpp"

namespace lua_tasks {
namespace {

using namespace state_codec_testing;  // the fixture (state_codec_fixture.hpp)

// ---------------------------------------------------------------------------
// Slices

// Runs a job one check at a time: every clock read is 1 ms past the last, so
// a budget of 0 stops at every check. Returns the number of Steps.
template <typename Job>
int StepToEnd(Job* job, uint32_t interval = 1) {
  TickingClock clock;
  job->set_check_interval(interval);
  int steps = 1;
  while (job->Step(&clock, 0) == CodecProgress::kMore) ++steps;
  return steps;
}

TEST_F(StateCodec, ASlicedEncodeWritesTheOneShotBytes) {
  Do(kRandomState);
  int sliced = 0;  // states with more than one pair: more than one Step
  for (int seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::string whole = Encode("v = random_state(" + std::to_string(seed) + ") v.again = v");
    LuaHost::HostSection section(host.get(), L);
    lua_getglobal(L, "v");
    StateEncoder e(L, -1);
    lua_pop(L, 1);
    const int steps = StepToEnd(&e);
    ASSERT_EQ(e.progress(), CodecProgress::kDone) << e.error();
    EXPECT_EQ(e.bytes(), whole);
    if (steps > 1) ++sliced;
    EXPECT_EQ(lua_gettop(L), base);
  }
  EXPECT_GT(sliced, 150);
}

TEST_F(StateCodec, ASlicedDecodeBuildsWhatTheOneShotBuilds) {
  Do(kRandomState);
  int sliced = 0;
  for (int seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::string bytes = Encode("v = random_state(" + std::to_string(seed) + ") v.again = v");
    LuaHost::HostSection section(host.get(), L);
    StateDecoder d(L, bytes);
    const int steps = StepToEnd(&d);
    ASSERT_EQ(d.progress(), CodecProgress::kDone) << d.error();
    if (steps > 1) ++sliced;
    d.PushResult(L);
    lua_setglobal(L, "back");
    ASSERT_TRUE(Eval("same(v, back)"));
    EXPECT_EQ(lua_gettop(L), base);
  }
  EXPECT_GT(sliced, 150);
}

TEST_F(StateCodec, AStepDoesAnIntervalOfWorkBetweenClockReads) {
  Do("v = {} for i = 1, 100000 do v[i] = { i } end");
  LuaHost::HostSection section(host.get(), L);
  lua_getglobal(L, "v");
  StateEncoder e(L, -1);
  lua_pop(L, 1);
  FakeClock clock;  // stands still: a budget of 0 is spent at the first read
  int steps = 1;
  while (e.Step(&clock, 0) == CodecProgress::kMore) ++steps;
  ASSERT_EQ(e.progress(), CodecProgress::kDone);
  // 200,000 pairs, a clock read every 4,096: about 49 slices, plus the checksum's.
  EXPECT_GE(steps, 40);
  EXPECT_LE(steps, 80);
  // With the budget not spent, one Step does it all.
  lua_getglobal(L, "v");
  StateEncoder whole(L, -1);
  lua_pop(L, 1);
  EXPECT_EQ(whole.Step(&clock, 1'000'000'000), CodecProgress::kDone);
  EXPECT_EQ(whole.bytes(), e.bytes());
}

TEST_F(StateCodec, ASlicedEncodeNamesTheSamePathAsTheOneShot) {
  const char* rows[] = {
      "v = { players = { {}, {}, { onHit = function() end } } }",
      "v = { list = { 1, 2, { ok = true }, { bad = { print } } } }",
      "v = { [{ inner = { print } }] = 1 }",
      "v = { inner = { [print] = 1 } }",
  };
  for (const char* row : rows) {
    SCOPED_TRACE(row);
    const std::string whole = EncodeError(row);
    LuaHost::HostSection section(host.get(), L);
    lua_getglobal(L, "v");
    StateEncoder e(L, -1);
    lua_pop(L, 1);
    StepToEnd(&e);
    EXPECT_EQ(e.progress(), CodecProgress::kFailed);
    EXPECT_EQ(e.error(), whole);
    EXPECT_EQ(e.failure(), CodecFailure::kValue);
    EXPECT_TRUE(e.bytes().empty());
  }
}

TEST_F(StateCodec, ASlicedDecodeRefusesWhatTheOneShotRefuses) {
  Do(kRandomState);
  const std::string good = Encode("v = random_state(5) v.again = v");
  std::vector<std::string> bad;
  for (size_t n = 0; n < good.size() - 4; n += 7) bad.push_back(Unchecked(good).substr(0, n));
  bad.push_back(Snapshot(TableHeader(0xffffffff)));
  bad.push_back(Snapshot(TableHeader(1) + std::string("\x02\x07\x00", 3)));
  std::string deep;
  for (int i = 0; i <= kMaxStateDepth; ++i) deep += TableHeader(1) + "\x02";
  bad.push_back(Snapshot(deep + TableHeader(0)));
  std::string good_flipped = good;
  good_flipped[good.size() / 2] ^= 4;
  bad.push_back(good_flipped);
  for (const std::string& bytes : bad) {
    const std::string whole = DecodeError(bytes);
    LuaHost::HostSection section(host.get(), L);
    StateDecoder d(L, bytes);
    StepToEnd(&d);
    EXPECT_EQ(d.progress(), CodecProgress::kFailed);
    EXPECT_EQ(d.error(), whole);
    EXPECT_EQ(lua_gettop(L), base);
  }
}

// The checksum of a large snapshot takes slices of its own, and a mismatch
// is found before anything is built.
TEST_F(StateCodec, TheChecksumIsCheckedInSlicesBeforeAnyTableIsBuilt) {
  std::string bytes = Encode("v = { s = ('x'):rep(4 << 20), t = { 1, 2, 3 } }");
  bytes[bytes.size() - 10] ^= 1;  // the last pairs: the structure alone reads fine
  LuaHost::HostSection section(host.get(), L);
  lua_gc(L, LUA_GCCOLLECT);
  const int before = lua_gc(L, LUA_GCCOUNT);
  StateDecoder d(L, bytes);
  FakeClock clock;
  int steps = 1;
  while (d.Step(&clock, 0) == CodecProgress::kMore) ++steps;
  EXPECT_EQ(d.error(), "corrupt state snapshot: checksum mismatch");
  EXPECT_GE(steps, 4);                                               // 1 MiB a slice
  EXPECT_LT(lua_gc(L, LUA_GCCOUNT) - before, 64) << "KB allocated";  // not the 4 MB string
}

TEST_F(StateCodec, TheDecoderStopsTheCollectorUntilItEnds) {
  Do("v = { { 1 }, { 2 }, { 3 } }");
  const std::string bytes = Encode("");
  {
    LuaHost::HostSection section(host.get(), L);
    StateDecoder d(L, bytes);
    d.set_check_interval(1);
    TickingClock clock;
    EXPECT_EQ(d.Step(&clock, 0), CodecProgress::kMore);
    EXPECT_EQ(lua_gc(L, LUA_GCISRUNNING), 0);
    EXPECT_EQ(d.Finish(), CodecProgress::kDone);
    EXPECT_EQ(lua_gc(L, LUA_GCISRUNNING), 1);
    d.PushResult(L);
    lua_pop(L, 1);
  }
  {
    LuaHost::HostSection section(host.get(), L);
    StateDecoder d(L, bytes);
    d.set_check_interval(1);
    TickingClock clock;
    EXPECT_EQ(d.Step(&clock, 0), CodecProgress::kMore);
    EXPECT_EQ(lua_gc(L, LUA_GCISRUNNING), 0);
  }  // dropped half done
  EXPECT_EQ(lua_gc(L, LUA_GCISRUNNING), 1);
  EXPECT_EQ(DecodeError(Checked("\x0b")), "corrupt state snapshot: unknown value tag 11 at byte 5");
  EXPECT_EQ(lua_gc(L, LUA_GCISRUNNING), 1);
}

// Dropped half done, a job leaves nothing behind: no stack slot, no
// registry slot, no memory once collected.
TEST_F(StateCodec, AJobDroppedHalfDoneFreesEverything) {
  Do("v = {} for i = 1, 20000 do v[i] = { name = 'n' .. i, i } end");
  const std::string bytes = Encode("");
  LuaHost::HostSection section(host.get(), L);
  lua_gc(L, LUA_GCCOLLECT);
  const int before = lua_gc(L, LUA_GCCOUNT);
  // A registry slot taken now is the first free one: the same after the jobs
  // if they gave theirs back.
  lua_pushboolean(L, 1);
  const int probe = luaL_ref(L, LUA_REGISTRYINDEX);
  luaL_unref(L, LUA_REGISTRYINDEX, probe);
  for (int stop_after : {1, 10, 30}) {
    SCOPED_TRACE(stop_after);
    {
      StateDecoder d(L, bytes);
      d.set_check_interval(1000);
      TickingClock clock;
      for (int i = 0; i < stop_after; ++i) ASSERT_EQ(d.Step(&clock, 0), CodecProgress::kMore);
      // The first slices check the checksum (256 KB each); later ones build.
      if (stop_after >= 10) {
        EXPECT_GT(lua_gc(L, LUA_GCCOUNT) - before, 50) << "KB: the tables built so far";
      }
    }
    {
      lua_getglobal(L, "v");
      StateEncoder e(L, -1);
      lua_pop(L, 1);
      e.set_check_interval(1000);
      TickingClock clock;
      for (int i = 0; i < stop_after; ++i) ASSERT_EQ(e.Step(&clock, 0), CodecProgress::kMore);
    }
    EXPECT_EQ(lua_gettop(L), base);
    EXPECT_EQ(lua_gc(L, LUA_GCISRUNNING), 1);
    lua_gc(L, LUA_GCCOLLECT);
    lua_gc(L, LUA_GCCOLLECT);
    EXPECT_LT(lua_gc(L, LUA_GCCOUNT) - before, 16) << "KB still held";
    lua_pushboolean(L, 1);
    const int again = luaL_ref(L, LUA_REGISTRYINDEX);
    luaL_unref(L, LUA_REGISTRYINDEX, again);
    EXPECT_EQ(again, probe);
  }
}

}  // namespace
}  // namespace lua_tasks
