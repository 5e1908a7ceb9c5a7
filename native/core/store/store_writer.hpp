// SPDX-License-Identifier: MIT
// StoreWriter: the thread that writes a store directory's database, many batches to a transaction.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "core/store/store_db.hpp"
#include "core/store/store_mark.hpp"

namespace lua_tasks {

// What the writer is asked to do. Each job has an id its submitter chose,
// which comes back with its outcome.
struct StoreLoad {
  std::string name;
};
struct StoreClaim {
  std::string name;
  int64_t token = 0;
};
struct StoreImport {  // a migrated snapshot: written unless the name has one
  std::string name;
  std::string bytes;
};
// Moves the -wal into the database and truncates it (a store's last runtime
// closed: a -wal lost later then loses nothing). Like a load, it runs after
// the writes before it, outside a transaction.
struct StoreCheckpoint {};
using StoreJobBody = std::variant<StoreBatch, StoreLoad, StoreClaim, StoreImport, StoreCheckpoint>;
struct StoreJob {
  uint64_t id = 0;
  StoreJobBody body;
};

struct StoreOutcome {
  enum class Kind : uint8_t {
    kDone,     // written (a batch, claim, import) or read (a load)
    kRefused,  // a batch whose token is not the name's owner's: nothing of it was written
    kFailed,   // nothing of it was written (or nothing was read)
  };
  uint64_t id = 0;
  Kind kind = Kind::kDone;
  std::optional<std::string> bytes;  // a load's snapshot (nullopt: none)
  bool written = false;              // an import: whether it was written
  int64_t owner_token = 0;           // kRefused: the owner's token (0: none recorded)
  // kFailed: why.
  StoreFailure failure = StoreFailure::kIo;
  int sqlite_code = 0;
  int sys_errno = 0;
  std::string message;
};

// One thread with its own read-write connection. Everything submitted while
// it was busy goes out together: the writes (batches, claims, imports) in
// ONE transaction, each under a savepoint of its own, so a batch refused by
// the fencing check, or failing, is rolled back alone while the others
// commit with one fsync. Jobs run in the order submitted; a load first
// commits the writes before it, then reads outside any transaction.
//
// Damage made loud: each transaction is counted in the database and, once
// committed, in the directory's StoreMark; the open refuses a database whose
// count is below the mark (ERR_STORE_CORRUPT: its -wal was lost). Before each
// COMMIT the writer checks that its files are still in the directory
// (StoreDb::Unlinked) and fails the whole transaction if not, as it would
// land in unlinked files. Stop() checkpoints the -wal into the database.
//
// `wake` is called on the writer thread whenever outcomes are ready; the
// owner then calls TakeOutcomes (from any thread).
class StoreWriter {
 public:
  struct Stats {
    uint64_t transactions = 0;  // committed transactions (one fsync each)
    uint64_t batches = 0;       // batches committed in them
  };

  // Opens the database and its mark, checks that the database is not behind
  // the mark (StoreError kCorrupt, naming what is missing), and starts the
  // thread. Throws StoreError.
  StoreWriter(const std::string& path, std::function<void()> wake);
  ~StoreWriter();  // Stop()
  StoreWriter(const StoreWriter&) = delete;
  StoreWriter& operator=(const StoreWriter&) = delete;

  void Submit(std::vector<StoreJob> jobs);
  std::vector<StoreOutcome> TakeOutcomes();
  // Finishes every job submitted, then ends the thread. Idempotent.
  void Stop();
  Stats stats() const;
  // Tests: the next `n` transactions fail at their commit (rolled back),
  // as an I/O error would make them.
  void FailNextTransactions(int n) { fail_next_.store(n); }

 private:
  void Run();
  void RunWrites(std::vector<StoreJob*>& writes, std::vector<StoreOutcome>& out);
  void RunLoad(const StoreJob& job, std::vector<StoreOutcome>& out);
  void RunCheckpoint(const StoreJob& job, std::vector<StoreOutcome>& out);
  void CheckMark();
  void Publish(std::vector<StoreOutcome> out);

  StoreDb db_;
  StoreMark mark_;  // <dir>/lua-tasks.mark, beside db_
  std::function<void()> wake_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<StoreJob> queue_;
  // Whether queue_ has jobs, read without mu_ while the writer looks for
  // the next job before sleeping (Run).
  std::atomic<bool> queued_{false};
  bool sleeping_ = false;  // the writer waits on cv_: Submit must wake it
  std::vector<StoreOutcome> outcomes_;
  bool stopping_ = false;
  Stats stats_;
  std::atomic<int> fail_next_{0};
  std::thread thread_;  // started by the constructor once the mark checked
};

}  // namespace lua_tasks
