// SPDX-License-Identifier: MIT
// StoreWriter: the thread that writes a store directory's database, many batches to a transaction.
#include "core/store/store_writer.hpp"

#include <cerrno>
#include <chrono>
#include <utility>

namespace lua_tasks {

namespace {

// How long the writer looks for the next job before it sleeps. Waking a
// sleeping thread cost the loop about 10 µs a transaction here (a futex
// wake that sends an interrupt to an idle CPU), as much again as the
// writer's own wake-up; a sequential committer's next batch comes about
// 50 µs after its outcome. Spent at most once per transaction (a few
// percent of a round of 100 committers, which takes milliseconds), and
// yielding the CPU as it looks, so on a loaded machine the loop's thread
// runs first.
constexpr std::chrono::microseconds kLookBeforeSleeping{60};

// A spin-wait hint to the CPU (another hyperthread runs meanwhile).
inline void Relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

StoreOutcome FailedOutcome(uint64_t id, const StoreError& e) {
  StoreOutcome o;
  o.id = id;
  o.kind = StoreOutcome::Kind::kFailed;
  o.failure = e.failure();
  o.sqlite_code = e.sqlite_code();
  o.sys_errno = e.sys_errno();
  o.message = e.what();
  return o;
}

StoreOutcome FailedOutcome(uint64_t id, const std::exception& e) {
  return FailedOutcome(id, StoreError(StoreFailure::kIo, 0, 0, e.what()));
}

// The directory of a path (the database's: where its mark lives).
std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

}  // namespace

StoreWriter::StoreWriter(const std::string& path, std::function<void()> wake)
    : db_(path, StoreDb::Access::kReadWrite), mark_(DirOf(path) + "/" + kStoreMarkFile), wake_(std::move(wake)) {
  CheckMark();
  thread_ = std::thread([this] { Run(); });
}

void StoreWriter::CheckMark() {
  // The mark first: the database's count only grows meanwhile (another
  // process may commit), so a healthy database is never seen below it.
  const std::optional<int64_t> mark = mark_.Read();
  const int64_t have = db_.Commits();
  if (!mark) {
    mark_.RaiseDurably(have);
    return;
  }
  if (have >= *mark) return;
  const std::string dir = DirOf(db_.path());
  throw StoreError(
      StoreFailure::kCorrupt, 0, 0,
      "The store database " + db_.path() + " is behind its high-water mark " + mark_.path() + ": it holds " +
          std::to_string(have) + " write transactions and " + std::to_string(*mark) +
          " were acknowledged, so the last " + std::to_string(*mark - have) +
          " (with every COMMIT, lease and import of any runtime of " + dir +
          " in them) are missing. Its write-ahead log " + db_.path() +
          "-wal was deleted, truncated or damaged, or the database was replaced by an older copy. Nothing was "
          "changed. To proceed, restore " +
          dir +
          " from a backup taken with its -wal file, or, to accept the loss and go on with what the database "
          "holds, delete " +
          mark_.path() + " (the next open writes a new mark).");
}

StoreWriter::~StoreWriter() {
  Stop();
}

void StoreWriter::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void StoreWriter::Submit(std::vector<StoreJob> jobs) {
  {
    std::lock_guard lock(mu_);
    for (StoreJob& j : jobs) queue_.push_back(std::move(j));
    queued_.store(true, std::memory_order_release);
    if (!sleeping_) return;  // busy, or looking: it takes the jobs without a wake
  }
  cv_.notify_one();
}

std::vector<StoreOutcome> StoreWriter::TakeOutcomes() {
  std::lock_guard lock(mu_);
  return std::exchange(outcomes_, {});
}

StoreWriter::Stats StoreWriter::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void StoreWriter::Publish(std::vector<StoreOutcome> out) {
  if (out.empty()) return;
  {
    std::lock_guard lock(mu_);
    for (StoreOutcome& o : out) outcomes_.push_back(std::move(o));
  }
  if (wake_) wake_();
}

void StoreWriter::Run() {
  for (;;) {
    std::vector<StoreJob> jobs;
    {
      const auto until = std::chrono::steady_clock::now() + kLookBeforeSleeping;
      while (!queued_.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until) {
        for (int i = 0; i < 32; i++) Relax();
        std::this_thread::yield();  // a loaded machine's other threads (the loop's) first
      }
      std::unique_lock lock(mu_);
      sleeping_ = true;
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      sleeping_ = false;
      if (queue_.empty()) break;  // stopping, and everything is done
      jobs = std::exchange(queue_, {});
      queued_.store(false, std::memory_order_relaxed);
    }
    std::vector<StoreOutcome> out;
    std::vector<StoreJob*> writes;
    for (StoreJob& job : jobs) {
      if (std::holds_alternative<StoreLoad>(job.body)) {
        RunWrites(writes, out);
        RunLoad(job, out);
      } else if (std::holds_alternative<StoreCheckpoint>(job.body)) {
        RunWrites(writes, out);
        RunCheckpoint(job, out);
      } else {
        writes.push_back(&job);
      }
    }
    RunWrites(writes, out);
    Publish(std::move(out));
  }
  // Closing: the database file alone then holds everything (a -wal lost
  // after this loses nothing). Best effort: another process's reader may
  // keep part of it in the -wal, and the mark still guards that part.
  try {
    db_.Checkpoint();
  } catch (const std::exception&) {
    // No one is left to tell; the data is safe in the -wal.
  }
}

void StoreWriter::RunCheckpoint(const StoreJob& job, std::vector<StoreOutcome>& out) {
  try {
    db_.Checkpoint();
    StoreOutcome o;
    o.id = job.id;
    out.push_back(std::move(o));
  } catch (const StoreError& e) {
    out.push_back(FailedOutcome(job.id, e));
  }
}

void StoreWriter::RunLoad(const StoreJob& job, std::vector<StoreOutcome>& out) {
  try {
    StoreOutcome o;
    o.id = job.id;
    o.bytes = db_.LoadSnapshot(std::get<StoreLoad>(job.body).name);
    out.push_back(std::move(o));
  } catch (const StoreError& e) {
    out.push_back(FailedOutcome(job.id, e));
  } catch (const std::exception& e) {
    out.push_back(FailedOutcome(job.id, e));
  }
}

void StoreWriter::RunWrites(std::vector<StoreJob*>& writes, std::vector<StoreOutcome>& out) {
  if (writes.empty()) return;
  std::vector<StoreOutcome> mine;
  mine.reserve(writes.size());
  uint64_t batches = 0;
  int64_t count = 0;
  bool committed = false;
  // A lone job's transaction is its savepoint: one fewer statement pair on
  // a sequential committer's path (a step + COMMIT after step + COMMIT).
  const bool alone = writes.size() == 1;
  try {
    db_.Begin();
    count = db_.CountCommit();
    for (StoreJob* job : writes) {
      StoreOutcome o;
      o.id = job->id;
      if (!alone) db_.Savepoint();
      try {
        if (auto* b = std::get_if<StoreBatch>(&job->body)) {
          const std::optional<int64_t> owner = b->token != 0 ? db_.OwnerToken(b->name) : std::nullopt;
          if (b->token != 0 && owner != b->token) {
            o.kind = StoreOutcome::Kind::kRefused;
            o.owner_token = owner.value_or(0);
          } else {
            db_.Apply(*b);
            ++batches;
          }
        } else if (auto* c = std::get_if<StoreClaim>(&job->body)) {
          db_.Claim(c->name, c->token);
        } else if (auto* im = std::get_if<StoreImport>(&job->body)) {
          o.written = db_.ImportSnapshot(im->name, im->bytes);
        }
      } catch (const StoreError& e) {
        o = FailedOutcome(job->id, e);
      } catch (const std::exception& e) {
        o = FailedOutcome(job->id, e);
      }
      if (alone) {
        // Rolled back with the transaction below when it failed.
      } else if (o.kind == StoreOutcome::Kind::kDone) {
        db_.ReleaseSavepoint();
      } else {
        db_.RollbackSavepoint();
      }
      mine.push_back(std::move(o));
    }
    if (alone && mine.front().kind != StoreOutcome::Kind::kDone) {
      // Nothing of it to keep: no transaction to count or commit.
      db_.Rollback();
      for (StoreOutcome& o : mine) out.push_back(std::move(o));
      writes.clear();
      return;
    }
    if (fail_next_.load() > 0) {
      fail_next_.fetch_sub(1);
      throw StoreError(StoreFailure::kIo, SQLITE_IOERR, EIO,
                       "The store database " + db_.path() + " failed to commit: injected failure (a test hook)");
    }
    // Two stat()s a transaction: an acknowledged batch must not be one
    // written into files the directory no longer has.
    if (const std::optional<std::string> why = db_.Unlinked()) {
      throw StoreError(StoreFailure::kIo, SQLITE_IOERR, ENOENT,
                       "The store directory " + DirOf(db_.path()) +
                           " was removed or changed while the store was open (" + *why +
                           "): nothing of this write was done, as it would go to files no longer in the directory "
                           "and be lost. Close the store; what it held is gone unless restored from a backup.");
    }
    db_.Commit();
    committed = true;
    {
      std::lock_guard lock(mu_);
      ++stats_.transactions;
      stats_.batches += batches;
    }
  } catch (const std::exception& e) {
    // Nothing of the transaction landed: every job of it failed, whatever
    // its own outcome was.
    db_.Rollback();
    const StoreError* se = dynamic_cast<const StoreError*>(&e);
    mine.clear();
    for (StoreJob* job : writes)
      mine.push_back(se != nullptr ? FailedOutcome(job->id, *se) : FailedOutcome(job->id, e));
  }
  if (committed) {
    try {
      mark_.Raise(count);
    } catch (const StoreError&) {
      // The batches are durable and are acknowledged: a mark left lower only
      // lets a later loss of this transaction go unnoticed, it never reports
      // one falsely. The next transaction raises it again.
    }
  }
  for (StoreOutcome& o : mine) out.push_back(std::move(o));
  writes.clear();
}

}  // namespace lua_tasks
