// SPDX-License-Identifier: MIT
// Tests for durable tasks with a fake clock: journal records, replay to the same wait and deadline, divergence.
#include "durable/durable_fixture.hpp"

namespace lua_tasks {
namespace {

TEST(JournalTest, FinishKeepsAnEndRecordAndRestartKeepsANewStart) {
  Journal j("t1", {});
  std::vector<StoreWrite> out;
  j.Append(RecordKind::kStart, "a", &out);
  j.Append(RecordKind::kStep, "b", &out);
  j.Append(RecordKind::kStep, "c", &out);
  out.clear();
  j.Finish(nullptr, false, &out);
  ASSERT_EQ(out.size(), 3u);
  for (const StoreWrite& w : out) EXPECT_FALSE(w.value.has_value());
  out.clear();
  std::string end = "e";
  j.Finish(&end, false, &out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out.back().key, "t1/0000000000");
  ASSERT_TRUE(out.back().value);
  std::string rec = *out.back().value;
  ASSERT_TRUE(UnsealRecord(&rec));
  EXPECT_EQ(rec, "Ee");
  out.clear();
  j.Restart("new", &out);
  EXPECT_EQ(j.size(), 1u);
  EXPECT_EQ(out.size(), 3u);  // two deletes, the new start
}

TEST_F(DurableTest, ARestoredTaskWaitsAgainWithItsFirstDeadline) {
  const char* src = R"(
    function f()
      local r, e = coroutine.yield("FOR", 10, "SECONDS")
      note("woke " .. e)
    end)";
  std::string id;
  {
    auto first = Open(src);
    id = StartNew(first.get(), "f");
    Advance(first.get(), 4 * kSec);
    EXPECT_EQ(Log(first.get()), "");
  }  // the process goes
  auto second = Open(src);
  const uint64_t key = Restore(second.get(), id, "f");
  EXPECT_EQ(second->rt.scheduler->IdOf(key), id);  // the same id
  Task* t = second->rt.scheduler->Find(key);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->current_wait(), WaitKind::kFor);
  Advance(second.get(), 5 * kSec + 900'000'000);
  EXPECT_EQ(Log(second.get()), "");
  Advance(second.get(), 200'000'000);
  EXPECT_EQ(Log(second.get()), "woke 10.1");  // counted from the yield in the first life
  EXPECT_EQ(second->hooks.ends, std::vector<std::string>{"done"});
}

// Another member's clock: the fixture's, its wall `skew` ahead (behind if
// negative). Its monotonic clock is its own, as another process's is.
class SkewedClock final : public Clock {
 public:
  SkewedClock(const FakeClock& real, int64_t skew) : real_(real), skew_(skew) {}
  int64_t MonoNs() const override { return real_.mono + 777 * kSec; }
  int64_t WallNs() const override { return real_.wall + skew_; }

 private:
  const FakeClock& real_;
  int64_t skew_;
};

// A durable FOR recorded on one member's clock and replayed on another's,
// 4 s ahead: on its own wall clock it is due 4 s early; with the offset that
// puts it on the first member's (both on PostgreSQL's), at its deadline.
TEST_F(DurableTest, ADeadlineReplayedOnAClockSetToTheSameTimeIsKept) {
  const char* src = R"(
    function f()
      coroutine.yield("FOR", 10, "SECONDS")
      note("woke")
    end)";
  for (const bool corrected : {false, true}) {
    SCOPED_TRACE(corrected ? "offset set" : "own wall clock");
    store.clear();
    std::string id;
    {
      auto first = Open(src);
      id = StartNew(first.get(), "f");
      Advance(first.get(), 4 * kSec);
    }  // its member goes; 6 s are left
    OffsetClock<SkewedClock> ahead(clock, 4 * kSec);
    if (corrected) ahead.set_offset_ns(-4 * kSec);
    auto second = Open(src, &ahead);
    Restore(second.get(), id, "f");
    Advance(second.get(), 2 * kSec + 100'000'000);
    EXPECT_EQ(Log(second.get()), corrected ? "" : "woke");  // uncorrected: 4 s early
    Advance(second.get(), 3 * kSec + 800'000'000);
    EXPECT_EQ(Log(second.get()), corrected ? "" : "woke");
    Advance(second.get(), 200'000'000);
    EXPECT_EQ(Log(second.get()), "woke");
  }
}

// A durable FOR or receive timeout ends at its journaled deadline on the
// wall clock, live or replayed, as an UNTIL_TIME does (a dormant one is
// woken by it too): the clock moved mid-wait moves its end. An ephemeral
// one measures elapsed time on the monotonic clock and ignores it.
TEST_F(DurableTest, ADurableTimedWaitEndsAtItsJournaledDeadlineWhereverTheWallClockMoves) {
  const char* src = R"(
    function f()
      coroutine.yield("FOR", 10, "SECONDS")
      note("woke")
    end
    function r() note(select(2, tasks.receive(10))) end)";
  struct Row {
    const char* what;
    const char* entry;
    bool durable, replayed;
    int64_t moved;  // the wall clock moved by, 4 s after the yield
    int64_t ends;   // monotonic time from the yield to its wake
  };
  const Row rows[] = {
      {"durable, live, set back", "f", true, false, -2 * kSec, 12 * kSec},
      {"durable, live, set forward", "f", true, false, 2 * kSec, 8 * kSec},
      {"durable, replayed, set back", "f", true, true, -2 * kSec, 12 * kSec},
      {"durable, replayed, set forward", "f", true, true, 2 * kSec, 8 * kSec},
      {"durable receive timeout, live, set back", "r", true, false, -2 * kSec, 12 * kSec},
      {"durable receive timeout, replayed, set forward", "r", true, true, 2 * kSec, 8 * kSec},
      {"ephemeral, set back", "f", false, false, -2 * kSec, 10 * kSec},
      {"ephemeral, set forward", "f", false, false, 2 * kSec, 10 * kSec},
      {"ephemeral receive timeout, set back", "r", false, false, -2 * kSec, 10 * kSec},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.what);
    store.clear();
    std::unique_ptr<Life> life = Open(src);
    std::string id;
    if (row.durable) {
      id = StartNew(life.get(), row.entry);
    } else {
      lua_getglobal(life->rt.host->main(), row.entry);
      ASSERT_NE(life->rt.scheduler->Start(life->rt.host->main(), 0, true), 0u);
    }
    Advance(life.get(), 4 * kSec);
    if (row.replayed) {
      life = Open(src);  // the process went and came back at once
      Restore(life.get(), id, row.entry);
    }
    clock.wall += row.moved;
    life->rt.scheduler->WallClockMoved(row.moved);
    Advance(life.get(), row.ends - 4 * kSec - 1'000'000);
    EXPECT_EQ(Log(life.get()), "");
    Advance(life.get(), 2'000'000);
    EXPECT_EQ(Log(life.get()), *row.entry == 'f' ? "woke" : "timeout");
  }
}

TEST_F(DurableTest, AStepRunsOnceAndItsResultsReplay) {
  const char* src = R"(
    n = 0
    function f()
      local v = tasks.step(function() n = n + 1; return n * 10 end)
      local t = math.random(1, 1000000000)
      note("drew " .. t)
      coroutine.yield("INDEFINITELY")
      note(v .. " " .. t .. " " .. n)
    end)";
  std::string id, drew;
  {
    auto first = Open(src);
    id = StartNew(first.get(), "f");
    drew = Log(first.get()).substr(5);
  }
  auto second = Open(src);  // another state: another random seed
  const uint64_t key = Restore(second.get(), id, "f");
  lua_State* L = second->rt.host->main();
  EXPECT_EQ(second->rt.scheduler->Resume(key, L, 0), Scheduler::ResumeResult::kResumed);
  // The step's result and the first life's random number; the step did not run again (n is 0).
  EXPECT_EQ(Log(second.get()), "drew " + drew + ",10 " + drew + " 0");
}

TEST_F(DurableTest, CodeThatYieldsOtherwiseFailsWithNondeterminism) {
  std::string id;
  {
    auto first = Open(R"(function f() coroutine.yield("FOR", 10, "SECONDS") end)");
    id = StartNew(first.get(), "f");
  }
  auto second = Open(R"(function f() coroutine.yield("FOR", 20, "SECONDS") end)");
  Restore(second.get(), id, "f");
  ASSERT_EQ(second->hooks.ends.size(), 1u);
  EXPECT_NE(second->hooks.ends[0].find("diverged from its journal at record 1"), std::string::npos)
      << second->hooks.ends[0];
  EXPECT_NE(second->hooks.ends[0].find("a yield (FOR)"), std::string::npos);
  // The journal stays for code that replays it.
  EXPECT_EQ(store.count(RecordKey(id, 1)), 1u);
}

// The kinds of task `id`'s records in the store, in order ("ASSY": start, step, step, yield).
std::string Kinds(const std::map<std::string, std::string>& store, const std::string& id) {
  std::string out;
  for (const auto& [k, v] : store) {
    if (k.rfind(id + "/", 0) == 0) out.push_back(v[0]);
  }
  return out;
}

constexpr const char* kStepsAndCommits = R"(
  n = 0
  function f()
    local sum = 0
    for i = 1, 3 do
      sum = sum + tasks.step(function() n = n + 1 note("ran " .. i) return i end)
      coroutine.yield("COMMIT")
    end
    coroutine.yield("INDEFINITELY")
    note("sum " .. sum)
  end)";

TEST_F(DurableTest, AStepAndItsCommitJournalTheStepAloneAndReplay) {
  std::string id;
  {
    auto first = Open(kStepsAndCommits);
    id = StartNew(first.get(), "f");
    Settle(first.get());
    EXPECT_EQ(first->hooks.commits, 4);  // three COMMITs, the INDEFINITELY's write
    EXPECT_EQ(Log(first.get()), "ran 1,ran 2,ran 3");
  }
  EXPECT_EQ(Kinds(store, id), "ASSSY");
  auto second = Open(kStepsAndCommits);
  const uint64_t key = Restore(second.get(), id, "f");
  Settle(second.get());
  EXPECT_EQ(second->hooks.commits, 0);  // a replayed COMMIT does not write again
  lua_State* L = second->rt.host->main();
  EXPECT_EQ(second->rt.scheduler->Resume(key, L, 0), Scheduler::ResumeResult::kResumed);
  Settle(second.get());
  EXPECT_EQ(Log(second.get()), "sum 6");  // no step ran again
  EXPECT_EQ(second->hooks.ends, std::vector<std::string>{"done"});
}

// Rewrites task `id`'s journal as versions that recorded every COMMIT wrote
// it: a yield record and its outcome (true) after each step. `cut`: the
// journal ends after the last step's yield record (killed mid-COMMIT).
void AsOldJournal(std::map<std::string, std::string>* store, const std::string& id, bool cut) {
  std::vector<std::string> records;
  for (const auto& [k, v] : *store) {
    if (k.rfind(id + "/", 0) == 0) records.push_back(v);
  }
  std::string ok;
  {
    lua_State* L = luaL_newstate();
    lua_pushboolean(L, 1);
    lua_pushnil(L);
    std::string error;
    EXPECT_TRUE(EncodeValues(L, 2, &ok, &error)) << error;
    lua_close(L);
  }
  YieldRecord commit;
  commit.kind = WaitKind::kCommit;
  std::vector<std::string> old;
  for (size_t i = 0; i < records.size(); ++i) {
    old.push_back(records[i]);
    if (records[i][0] != static_cast<char>(RecordKind::kStep)) continue;
    old.push_back(SealRecord(RecordKind::kYield, EncodeYield(commit)));
    const bool last_step = i + 1 < records.size() && records[i + 1][0] != static_cast<char>(RecordKind::kStep);
    if (cut && last_step) break;
    old.push_back(SealRecord(RecordKind::kIn, ok));
  }
  for (auto it = store->begin(); it != store->end();) {
    it = it->first.rfind(id + "/", 0) == 0 ? store->erase(it) : std::next(it);
  }
  for (size_t i = 0; i < old.size(); ++i) (*store)[RecordKey(id, i)] = old[i];
}

TEST_F(DurableTest, AJournalThatRecordsEveryCommitReplays) {
  std::string id;
  {
    auto first = Open(kStepsAndCommits);
    id = StartNew(first.get(), "f");
    Settle(first.get());
  }
  AsOldJournal(&store, id, false);
  EXPECT_EQ(Kinds(store, id), "ASYISYISYIY");
  auto second = Open(kStepsAndCommits);
  const uint64_t key = Restore(second.get(), id, "f");
  Settle(second.get());
  EXPECT_TRUE(second->hooks.ends.empty());
  EXPECT_EQ(second->hooks.commits, 0);
  lua_State* L = second->rt.host->main();
  EXPECT_EQ(second->rt.scheduler->Resume(key, L, 0), Scheduler::ResumeResult::kResumed);
  Settle(second.get());
  EXPECT_EQ(Log(second.get()), "sum 6");
  EXPECT_EQ(second->hooks.ends, std::vector<std::string>{"done"});
}

TEST_F(DurableTest, AJournalCutInsideARecordedCommitCommitsAgainAndGoesOnInTheNewForm) {
  std::string id;
  {
    auto first = Open(kStepsAndCommits);
    id = StartNew(first.get(), "f");
    Settle(first.get());
  }
  AsOldJournal(&store, id, true);
  EXPECT_EQ(Kinds(store, id), "ASYISYISY");
  {
    auto second = Open(kStepsAndCommits);
    Restore(second.get(), id, "f");
    Settle(second.get());
    EXPECT_EQ(second->hooks.commits, 2);  // the third COMMIT again, then the INDEFINITELY's write
    EXPECT_EQ(Log(second.get()), "");
  }
  EXPECT_EQ(Kinds(store, id), "ASYISYISYIY");  // its outcome as that journal has it
  auto third = Open(kStepsAndCommits);
  const uint64_t key = Restore(third.get(), id, "f");
  Settle(third.get());
  lua_State* L = third->rt.host->main();
  EXPECT_EQ(third->rt.scheduler->Resume(key, L, 0), Scheduler::ResumeResult::kResumed);
  Settle(third.get());
  EXPECT_EQ(Log(third.get()), "sum 6");
}

// Only a failed COMMIT leaves a record; the COMMITs around it that landed
// leave none, and its record counts those before it.
TEST_F(DurableTest, AFailedCommitIsJournaledAndItsErrorReplaysBetweenCommitsThatLanded) {
  const char* src = R"(
    function f()
      tasks.step(function() note("ran") end)
      coroutine.yield("COMMIT")
      coroutine.yield("COMMIT")
      local ok, err = pcall(coroutine.yield, "COMMIT")
      note(tostring(ok) .. " " .. tostring(err))
      coroutine.yield("COMMIT")
      tasks.step(function() note("ran again") end)
      coroutine.yield("INDEFINITELY")
      note("end")
    end)";
  std::string id;
  {
    auto first = Open(src);
    first->hooks.fail_at = 3;
    id = StartNew(first.get(), "f");
    Settle(first.get());
    EXPECT_EQ(Log(first.get()), "ran,false disk on fire,ran again");
  }
  EXPECT_EQ(Kinds(store, id), "ASFSY");
  auto second = Open(src);
  const uint64_t key = Restore(second.get(), id, "f");
  Settle(second.get());
  EXPECT_EQ(Log(second.get()), "false disk on fire");  // no step ran again; the error came back at its COMMIT
  EXPECT_EQ(second->hooks.commits, 0);
  lua_State* L = second->rt.host->main();
  EXPECT_EQ(second->rt.scheduler->Resume(key, L, 0), Scheduler::ResumeResult::kResumed);
  Settle(second.get());
  EXPECT_EQ(second->hooks.ends, std::vector<std::string>{"done"});
}

// Two named steps in the first run; `second`: the code a restart meets.
// Returns the ends of the second life.
class StepIdentityTest : public DurableTest {
 protected:
  std::vector<std::string> Replay(const char* first, const char* second, std::string* log) {
    std::string id;
    {
      auto life = Open(first);
      id = StartNew(life.get(), "f");
    }
    auto life = Open(second);
    const uint64_t key = Restore(life.get(), id, "f");
    if (life->hooks.ends.empty()) {
      lua_State* L = life->rt.host->main();
      EXPECT_EQ(life->rt.scheduler->Resume(key, L, 0), Scheduler::ResumeResult::kResumed);
    }
    *log = Log(life.get());
    return life->hooks.ends;
  }
};

constexpr const char* kNamedSteps = R"(
  function f()
    local a = tasks.step("gold", function() note("gold ran") return "g" end)
    local b = tasks.step("mail", function() note("mail ran") return "m" end)
    coroutine.yield("INDEFINITELY")
    note(a .. b)
  end)";

TEST_F(StepIdentityTest, SwappedNamedStepsFailWithNondeterminismNamingBoth) {
  std::string log;
  const auto ends = Replay(kNamedSteps, R"(
    function f()
      local b = tasks.step("mail", function() note("mail ran") return "m" end)
      local a = tasks.step("gold", function() note("gold ran") return "g" end)
      coroutine.yield("INDEFINITELY")
      note(a .. b)
    end)",
                           &log);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_NE(ends[0].find("diverged from its journal at record 1"), std::string::npos) << ends[0];
  EXPECT_NE(ends[0].find("the journal holds tasks.step \"gold\", the code now made tasks.step \"mail\""),
            std::string::npos)
      << ends[0];
  EXPECT_EQ(log, "");  // neither step ran again
}

TEST_F(StepIdentityTest, UnchangedNamedStepsReplayWithoutRunningAgain) {
  std::string log;
  const auto ends = Replay(kNamedSteps, kNamedSteps, &log);
  EXPECT_EQ(ends, std::vector<std::string>{"done"});
  EXPECT_EQ(log, "gm");
}

TEST_F(StepIdentityTest, AStepWithoutANameOnEitherSideIsNotChecked) {
  // Names added by the new code to steps recorded without one (as an older
  // version wrote them) replay; so do unnamed steps whose lines moved.
  const char* unnamed = R"(
    function f()
      local a = tasks.step(function() note("gold ran") return "g" end)
      local b = tasks.step(function() note("mail ran") return "m" end)
      coroutine.yield("INDEFINITELY")
      note(a .. b)
    end)";
  std::string log;
  EXPECT_EQ(Replay(unnamed, kNamedSteps, &log), std::vector<std::string>{"done"});
  EXPECT_EQ(log, "gm");
  EXPECT_EQ(Replay(kNamedSteps, unnamed, &log), std::vector<std::string>{"done"});
  EXPECT_EQ(log, "gm");
}

TEST_F(StepIdentityTest, ARecordWrittenWithoutAnIdentityReplaysUnderANamedStep) {
  std::string id;
  {
    auto life = Open(kNamedSteps);
    id = StartNew(life.get(), "f");
  }
  // Rewrite the step records as a version without identities wrote them.
  int rewritten = 0;
  for (auto& [k, v] : store) {
    if (k.rfind(id + "/", 0) != 0) continue;
    std::string r = v;
    ASSERT_TRUE(UnsealRecord(&r));
    std::optional<std::string_view> identity;
    const std::string_view values = SplitIdentity(std::string_view(r).substr(1), &identity);
    if (static_cast<RecordKind>(r[0]) != RecordKind::kStep || !identity) continue;
    v = SealRecord(RecordKind::kStep, values);
    ++rewritten;
  }
  EXPECT_EQ(rewritten, 2);
  auto life = Open(R"(
    function f()
      local b = tasks.step("mail", function() note("mail ran") return "m" end)
      local a = tasks.step("gold", function() note("gold ran") return "g" end)
      coroutine.yield("INDEFINITELY")
      note(a .. b)
    end)");  // swapped: an old record cannot tell, and replays
  const uint64_t key = Restore(life.get(), id, "f");
  EXPECT_TRUE(life->hooks.ends.empty());
  lua_State* L = life->rt.host->main();
  EXPECT_EQ(life->rt.scheduler->Resume(key, L, 0), Scheduler::ResumeResult::kResumed);
  EXPECT_EQ(life->hooks.ends, std::vector<std::string>{"done"});
  EXPECT_EQ(Log(life.get()), "mg");  // the values in record order: what an unchecked record gives
}

TEST_F(StepIdentityTest, ANamedStepOutsideADurableTaskJustCallsItsFunction) {
  auto life = Open(R"(function plain() return tasks.step("sum", function(a, b) return a + b, "x" end, 1, 2) end)");
  lua_State* L = life->rt.host->main();
  const int top = lua_gettop(L);
  lua_getglobal(L, "plain");
  ASSERT_EQ(lua_pcall(L, 0, LUA_MULTRET, 0), LUA_OK) << lua_tostring(L, -1);
  ASSERT_EQ(lua_gettop(L), top + 2);
  EXPECT_EQ(lua_tointeger(L, top + 1), 3);
  EXPECT_STREQ(lua_tostring(L, top + 2), "x");
  lua_settop(L, top);
}

TEST_F(StepIdentityTest, AStepNameIsAStringOfAtMost255Bytes) {
  auto life = Open(R"(
    function long() return pcall(tasks.step, string.rep("x", 256), function() end) end
    function bad() return pcall(tasks.step, "name", 42) end)");
  lua_State* L = life->rt.host->main();
  for (const char* fn : {"long", "bad"}) {
    lua_getglobal(L, fn);
    ASSERT_EQ(lua_pcall(L, 0, 2, 0), LUA_OK);
    EXPECT_FALSE(lua_toboolean(L, -2)) << fn;
    const std::string m = lua_tostring(L, -1);
    lua_pop(L, 2);
    EXPECT_NE(m.find(std::string(fn) == "long" ? "at most 255 bytes" : "bad argument #2"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace lua_tasks

namespace lua_tasks {
namespace {

class ReplayOnlyTest : public DurableTest {
 protected:
  // The journal of a task of `first_code` that waited, woke and waited
  // again, its last record cut (a crash before it was written): it ends
  // with the first wait's outcome.
  std::string Recorded(const char* first_code) {
    auto first = Open(first_code);
    const std::string id = StartNew(first.get(), "f");
    Advance(first.get(), 11 * kSec);
    store.erase(RecordKey(id, Kinds(store, id).size() - 1));
    return id;
  }
  std::unique_ptr<Life> Replay(const char* code, const std::string& id) {
    auto life = Open(code);
    life->rt.scheduler->replayer()->set_replay_only(true);
    Restore(life.get(), id, "f");
    return life;
  }
};

constexpr const char* kWaits = R"(
  n = 0
  function f()
    tasks.step("grant", function() n = n + 1 return 7 end)
    coroutine.yield("FOR", 10, "SECONDS")
    coroutine.yield("INDEFINITELY")
  end)";

TEST_F(ReplayOnlyTest, ATaskReplaysToItsWaitAndStopsThereRunningAndWritingNothing) {
  std::string id;
  {
    auto first = Open(kWaits);
    id = StartNew(first.get(), "f");
  }
  const auto before = store;
  auto replay = Replay(kWaits, id);
  EXPECT_EQ(replay->hooks.ends, std::vector<std::string>{"cancelled"});
  Advance(replay.get(), 20 * kSec);
  Run(replay.get(), "note('ran ' .. n)");
  EXPECT_EQ(Log(replay.get()), "ran 0");  // the step was answered from the journal
  EXPECT_EQ(store, before);               // its end was not journaled
}

TEST_F(ReplayOnlyTest, CodePastTheJournalsEndStopsBeforeItRunsAnythingLive) {
  const std::string id = Recorded(kWaits);
  EXPECT_EQ(Kinds(store, id), "ASYI");  // start, step, the wait, its outcome
  const auto before = store;
  auto replay = Replay(R"(
    n = 0
    function f()
      tasks.step("grant", function() n = n + 1 return 7 end)
      coroutine.yield("FOR", 10, "SECONDS")
      local ok = pcall(tasks.step, "side", function() n = n + 100 end)
      note("caught " .. tostring(ok))
      tasks.step("again", function() n = n + 100 end)
      coroutine.yield("INDEFINITELY")
    end)",
                       id);
  EXPECT_EQ(replay->hooks.ends, std::vector<std::string>{"cancelled"});
  Run(replay.get(), "note('ran ' .. n)");
  EXPECT_EQ(Log(replay.get()), "caught false,ran 0");  // neither live step ran, though the code caught the stop
  EXPECT_EQ(store, before);
}

TEST_F(ReplayOnlyTest, ChangedCodeFailsWithNondeterminismAndNothingIsWritten) {
  std::string id;
  {
    auto first = Open(kWaits);
    id = StartNew(first.get(), "f");
  }
  const auto before = store;
  auto replay = Replay(R"(
    function f()
      tasks.step("pay", function() return 7 end)
      coroutine.yield("FOR", 10, "SECONDS")
    end)",
                       id);
  ASSERT_EQ(replay->hooks.ends.size(), 1u);
  EXPECT_NE(replay->hooks.ends[0].find("diverged from its journal at record 1"), std::string::npos)
      << replay->hooks.ends[0];
  EXPECT_NE(replay->hooks.ends[0].find("tasks.step \"pay\""), std::string::npos);
  EXPECT_EQ(store, before);
}

}  // namespace
}  // namespace lua_tasks
