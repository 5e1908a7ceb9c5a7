// SPDX-License-Identifier: MIT
// StoreMark: a store directory's high-water mark, kept outside the database and its WAL.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace lua_tasks {

// The mark's file name in the store directory.
inline constexpr char kStoreMarkFile[] = "lua-tasks.mark";

// How and why: SQLite keeps every transaction since the last checkpoint in
// the -wal file only. Delete or damage that file and those transactions are
// gone, and the database still opens, consistent and older: acknowledged
// COMMITs vanish without a word. So the database counts its write
// transactions (StoreDb::CountCommit, inside each one) and, after each
// COMMIT returned, the writer raises this mark to that count. An open that
// finds the database's count below the mark knows transactions are missing.
//
// The mark is a lower bound of what the database holds, never above it: it
// is raised only after the COMMIT is durable, and never lowered (a file lock
// orders the writers of several processes). The write is a pwrite into the
// page cache, before the batches are acknowledged, so it survives SIGKILL
// exactly. Its fdatasync runs on a thread of its own, off the COMMIT path,
// at most once a second and when the mark closes, so after a power cut the
// mark may lag the database by up to a second of transactions (then their
// loss is not detected; nothing is ever reported falsely).
//
// Format: two 64-byte slots at offsets 0 and 512 (separate sectors, so a
// torn write spoils one at most), each "LTMK", u32 version 1, u64 count,
// u32 CRC-32C of the 16 bytes before it, little-endian. A raise writes the
// slot not holding the highest count; a read takes the highest valid one.
class StoreMark {
 public:
  // Opens (creating) `path`; throws StoreError (kIo).
  explicit StoreMark(std::string path);
  ~StoreMark();
  StoreMark(const StoreMark&) = delete;
  StoreMark& operator=(const StoreMark&) = delete;

  const std::string& path() const { return path_; }
  // The highest count recorded; nullopt for a new (empty) file. Throws
  // StoreError (kCorrupt) when the file has content but no valid slot.
  std::optional<int64_t> Read();
  // Records `count` unless a higher one is recorded already, and asks the
  // syncer for an fdatasync. Throws StoreError (kIo).
  void Raise(int64_t count);
  // Raises and fdatasyncs the file and its directory before returning (a
  // new file's first record).
  void RaiseDurably(int64_t count);

 private:
  std::optional<int64_t> ReadLocked();
  void WriteLocked(int64_t count);
  void SyncLoop();

  std::string path_;
  int fd_ = -1;  // owned; closed by the destructor after the syncer ended
  std::mutex mu_;
  std::condition_variable cv_;
  bool dirty_ = false;  // written since the last fdatasync began
  bool stopping_ = false;
  std::thread syncer_;  // last: starts once everything above exists
};

}  // namespace lua_tasks
