// SPDX-License-Identifier: MIT
// Tests for StoreWriter: batches all or nothing, many to one transaction, token fencing, loads in order, damage made
// loud.
#include "core/store/store_writer.hpp"

#include <cerrno>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "store_test_dir.hpp"

namespace lua_tasks {
namespace {

// A writer and the outcomes it reported, by job id.
class Harness {
 public:
  explicit Harness(const std::string& db)
      : writer_(db, [this] {
          std::lock_guard lock(mu_);
          woken_ = true;
          cv_.notify_all();
        }) {}

  // Submits the jobs together and waits for all their outcomes.
  std::map<uint64_t, StoreOutcome> Run(std::vector<StoreJob> jobs) {
    size_t want = jobs.size();
    writer_.Submit(std::move(jobs));
    std::map<uint64_t, StoreOutcome> got;
    while (got.size() < want) {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return woken_; });
      woken_ = false;
      lock.unlock();
      for (StoreOutcome& o : writer_.TakeOutcomes()) got[o.id] = std::move(o);
    }
    return got;
  }
  StoreWriter& writer() { return writer_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;
  StoreWriter writer_;
};

StoreJob Batch(uint64_t id, const std::string& name, int64_t token, const std::string& key, const std::string& value) {
  StoreBatch b;
  b.name = name;
  b.token = token;
  b.seq = static_cast<int64_t>(id);
  b.state = "state of " + name + " " + value;
  b.writes.push_back({kSpaceStore, key, ValueSnapshot(value)});
  return {id, std::move(b)};
}

TEST(StoreWriterTest, ManyBatchesGoOutInOneTransaction) {
  TempDir dir;
  Harness h(dir.Db());
  std::vector<StoreJob> jobs;
  for (uint64_t i = 1; i <= 50; i++)
    jobs.push_back(Batch(i, "rt" + std::to_string(i % 5), 0, "k" + std::to_string(i), "v"));
  auto out = h.Run(std::move(jobs));
  for (auto& [id, o] : out) EXPECT_EQ(o.kind, StoreOutcome::Kind::kDone) << id;
  // Submitted together: at most a transaction or two, never one each.
  EXPECT_LE(h.writer().stats().transactions, 2u);
  EXPECT_EQ(h.writer().stats().batches, 50u);
  StoreDb r(dir.Db(), StoreDb::Access::kReadOnly);
  EXPECT_EQ(r.Keys("rt1", kSpaceStore, "", "", -1).size(), 10u);
}

TEST(StoreWriterTest, AStaleTokenIsRefusedWhileTheOthersLand) {
  TempDir dir;
  Harness h(dir.Db());
  auto claims = h.Run({{1, StoreClaim{"a", 3}}, {2, StoreClaim{"b", 1}}});
  ASSERT_EQ(claims[1].kind, StoreOutcome::Kind::kDone);
  auto out = h.Run({Batch(10, "a", 3, "x", "ok"), Batch(11, "b", 7, "x", "stale"), Batch(12, "b", 1, "y", "ok"),
                    Batch(13, "c", 1, "x", "no owner")});
  EXPECT_EQ(out[10].kind, StoreOutcome::Kind::kDone);
  EXPECT_EQ(out[11].kind, StoreOutcome::Kind::kRefused);
  EXPECT_EQ(out[11].owner_token, 1);
  EXPECT_EQ(out[12].kind, StoreOutcome::Kind::kDone);
  EXPECT_EQ(out[13].kind, StoreOutcome::Kind::kRefused);
  EXPECT_EQ(out[13].owner_token, 0);
  StoreDb r(dir.Db(), StoreDb::Access::kReadOnly);
  EXPECT_EQ(r.Get("a", kSpaceStore, "x"), ValueSnapshot("ok"));
  EXPECT_EQ(r.Get("b", kSpaceStore, "x"), std::nullopt);  // all or nothing: neither its key...
  EXPECT_EQ(r.LoadSnapshot("b"), "state of b ok");        // ...nor its state
  EXPECT_EQ(r.Get("b", kSpaceStore, "y"), ValueSnapshot("ok"));
  EXPECT_EQ(h.writer().stats().batches, 2u);
}

// A lone batch runs without a savepoint of its own: refused, its
// transaction is rolled back whole and is not counted.
TEST(StoreWriterTest, ALoneRefusedBatchWritesNothingAndTheNextLands) {
  TempDir dir;
  Harness h(dir.Db());
  ASSERT_EQ(h.Run({{1, StoreClaim{"a", 3}}})[1].kind, StoreOutcome::Kind::kDone);
  const uint64_t before = h.writer().stats().transactions;
  auto refused = h.Run({Batch(2, "a", 7, "x", "stale")});
  EXPECT_EQ(refused[2].kind, StoreOutcome::Kind::kRefused);
  EXPECT_EQ(refused[2].owner_token, 3);
  EXPECT_EQ(h.writer().stats().transactions, before);
  StoreDb r(dir.Db(), StoreDb::Access::kReadOnly);
  EXPECT_EQ(r.Get("a", kSpaceStore, "x"), std::nullopt);
  EXPECT_EQ(r.LoadSnapshot("a"), std::nullopt);
  auto ok = h.Run({Batch(3, "a", 3, "x", "ok")});
  EXPECT_EQ(ok[3].kind, StoreOutcome::Kind::kDone);
  EXPECT_EQ(h.writer().stats().transactions, before + 1);
  EXPECT_EQ(r.Get("a", kSpaceStore, "x"), ValueSnapshot("ok"));
  EXPECT_EQ(r.LoadSnapshot("a"), "state of a ok");
}

TEST(StoreWriterTest, AFailedTransactionFailsAllItsBatchesAndNothingLands) {
  TempDir dir;
  Harness h(dir.Db());
  h.writer().FailNextTransactions(1);
  auto out = h.Run({Batch(1, "a", 0, "x", "1"), Batch(2, "b", 0, "x", "2")});
  for (auto& [id, o] : out) {
    EXPECT_EQ(o.kind, StoreOutcome::Kind::kFailed);
    EXPECT_NE(o.message.find("injected"), std::string::npos);
  }
  StoreDb r(dir.Db(), StoreDb::Access::kReadOnly);
  EXPECT_EQ(r.Get("a", kSpaceStore, "x"), std::nullopt);
  EXPECT_EQ(r.LoadSnapshot("b"), std::nullopt);
  auto again = h.Run({Batch(3, "a", 0, "x", "1")});
  EXPECT_EQ(again[3].kind, StoreOutcome::Kind::kDone);
  EXPECT_EQ(r.Get("a", kSpaceStore, "x"), ValueSnapshot("1"));
}

TEST(StoreWriterTest, ALoadSeesTheWritesSubmittedBeforeIt) {
  TempDir dir;
  Harness h(dir.Db());
  auto out = h.Run({{1, StoreLoad{"a"}},
                    Batch(2, "a", 0, "x", "1"),
                    {3, StoreLoad{"a"}},
                    {4, StoreImport{"a", "old"}},
                    {5, StoreImport{"z", "old"}},
                    {6, StoreLoad{"z"}}});
  EXPECT_EQ(out[1].bytes, std::nullopt);
  EXPECT_EQ(out[3].bytes, "state of a 1");
  EXPECT_FALSE(out[4].written);  // the db wins
  EXPECT_TRUE(out[5].written);
  EXPECT_EQ(out[6].bytes, "old");
}

TEST(StoreWriterTest, StopFinishesWhatWasSubmitted) {
  TempDir dir;
  {
    StoreWriter w(dir.Db(), nullptr);
    std::vector<StoreJob> jobs;
    for (uint64_t i = 1; i <= 20; i++) jobs.push_back(Batch(i, "a", 0, "k" + std::to_string(i), "v"));
    w.Submit(std::move(jobs));
    w.Stop();
    w.Stop();  // idempotent
    EXPECT_EQ(w.TakeOutcomes().size(), 20u);
  }
  StoreDb r(dir.Db(), StoreDb::Access::kReadOnly);
  EXPECT_EQ(r.Keys("a", kSpaceStore, "", "", -1).size(), 20u);
}

namespace fs = std::filesystem;

fs::path DirOf(const TempDir& dir) {
  return fs::path(dir.Db()).parent_path();
}

std::string OpenFails(const std::string& db) {
  try {
    StoreWriter w(db, nullptr);
  } catch (const StoreError& e) {
    EXPECT_EQ(e.failure(), StoreFailure::kCorrupt) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "opened";
  return "";
}

// Regression: a lost -wal silently lost every acknowledged COMMIT
// since the last checkpoint. The database copied without its -wal while the
// writer is open is what a SIGKILL and a deleted -wal leave.
TEST(StoreWriterTest, ADatabaseBehindItsMarkIsRefusedNamingWhatIsMissing) {
  TempDir dir;
  TempDir copy;
  {
    Harness h(dir.Db());
    for (uint64_t i = 1; i <= 3; i++) h.Run({Batch(i, "a", 0, "k" + std::to_string(i), "v")});
    for (const char* f : {"lua-tasks.sqlite", "lua-tasks.mark"})
      fs::copy_file(DirOf(dir) / f, DirOf(copy) / f, fs::copy_options::overwrite_existing);
  }
  const std::string m = OpenFails(copy.Db());
  EXPECT_NE(m.find("is behind its high-water mark " + (DirOf(copy) / "lua-tasks.mark").string()), std::string::npos)
      << m;
  EXPECT_NE(m.find("were acknowledged, so the last "), std::string::npos) << m;
  EXPECT_NE(m.find("-wal was deleted, truncated or damaged"), std::string::npos) << m;
  EXPECT_NE(m.find("delete " + (DirOf(copy) / "lua-tasks.mark").string()), std::string::npos) << m;
  // Refused again until someone decides; deleting the mark accepts the loss.
  OpenFails(copy.Db());
  fs::remove(DirOf(copy) / "lua-tasks.mark");
  StoreWriter accepted(copy.Db(), nullptr);
}

TEST(StoreWriterTest, StopCheckpointsSoALostWalLosesNothing) {
  TempDir dir;
  {
    Harness h(dir.Db());
    h.Run({Batch(1, "a", 0, "k", "v")});
    // Another connection keeps the -wal from being removed at close: only
    // the writer's own checkpoint empties it.
    StoreDb other(dir.Db(), StoreDb::Access::kReadOnly);
    h.writer().Stop();
    EXPECT_EQ(fs::file_size(DirOf(dir) / "lua-tasks.sqlite-wal"), 0u);
  }
  fs::remove(DirOf(dir) / "lua-tasks.sqlite-wal");
  Harness again(dir.Db());  // not behind its mark
  StoreDb r(dir.Db(), StoreDb::Access::kReadOnly);
  EXPECT_EQ(r.Get("a", kSpaceStore, "k"), ValueSnapshot("v"));
}

TEST(StoreWriterTest, ACheckpointJobEmptiesTheWalAfterTheWritesBeforeIt) {
  TempDir dir;
  Harness h(dir.Db());
  StoreDb other(dir.Db(), StoreDb::Access::kReadOnly);
  auto out = h.Run({Batch(1, "a", 0, "k", "v"), {2, StoreCheckpoint{}}});
  EXPECT_EQ(out[1].kind, StoreOutcome::Kind::kDone);
  EXPECT_EQ(out[2].kind, StoreOutcome::Kind::kDone);
  EXPECT_EQ(fs::file_size(DirOf(dir) / "lua-tasks.sqlite-wal"), 0u);
  EXPECT_EQ(other.Get("a", kSpaceStore, "k"), ValueSnapshot("v"));
}

// Regression: with the directory removed, batches were
// acknowledged into unlinked files and lost.
TEST(StoreWriterTest, ARemovedDirectoryFailsEveryBatchNamingIt) {
  TempDir dir;
  Harness h(dir.Db());
  EXPECT_EQ(h.Run({Batch(1, "a", 0, "k", "v")})[1].kind, StoreOutcome::Kind::kDone);
  fs::remove_all(DirOf(dir));
  for (uint64_t id = 2; id <= 3; id++) {
    StoreOutcome o = h.Run({Batch(id, "a", 0, "k", "w")})[id];
    EXPECT_EQ(o.kind, StoreOutcome::Kind::kFailed);
    EXPECT_EQ(o.sys_errno, ENOENT);
    EXPECT_NE(o.message.find("The store directory " + DirOf(dir).string() + " was removed"), std::string::npos)
        << o.message;
    EXPECT_NE(o.message.find("nothing of this write was done"), std::string::npos) << o.message;
  }
}

}  // namespace
}  // namespace lua_tasks
