// SPDX-License-Identifier: MIT
// FileLock: an exclusive OS lock on a file that dies with its holder, and the record naming that holder.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace lua_tasks {

struct LockAttempt;

// Design: flock(2), not fcntl record locks. An flock belongs to the open file
// description, so two opens of one file conflict even inside one process (two
// Runtimes of one name, or two Workers), and the kernel drops it when the last
// descriptor of that description closes: on Release(), or when the process
// dies, however it dies. No stale lock is ever left to clean by hand. fcntl
// locks belong to the process: a second open in the same process would be
// granted, and closing either descriptor would drop both.
//
// The lock file is never deleted: unlinking it would let a newcomer create and
// lock a fresh file while the old holder still holds the unlinked one. Its
// content is a record the holder writes once it holds the lock (who it is,
// since when), so that a refused opener can name the holder, and the next
// holder can read what its predecessor left (a counter that must keep growing).
// On network file systems flock may be emulated by per-process locks: the
// guarantee stated here is for local file systems.
class FileLock {
 public:
  FileLock() = default;
  FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock() { Release(); }

  bool held() const { return fd_ >= 0; }
  // Drops the lock by closing the descriptor. Idempotent.
  void Release();

 private:
  friend LockAttempt TryLockFile(const std::string& path,
                                 const std::function<std::string(std::string_view previous)>& record_for);
  explicit FileLock(int fd) : fd_(fd) {}

  int fd_ = -1;  // owned; open with O_CLOEXEC (a spawned child must not inherit the lock) and locked while held
};

enum class LockOutcome { kAcquired, kHeld, kFailed };

// What one try gave; see TryLockFile.
struct LockAttempt {
  LockOutcome outcome = LockOutcome::kFailed;
  FileLock lock;             // kAcquired: the lock, now held by whoever keeps this
  std::string record;        // kAcquired: the record the previous holder left; kHeld: the holder's
  int error = 0;             // kFailed: the errno
  const char* syscall = "";  // kFailed: the call that failed ("open", "flock", "read", "write", "ftruncate")
};

// The most of a record that is read: records are a line of JSON.
inline constexpr size_t kMaxLockRecord = 4096;

// Tries once, without waiting, to take the lock on `path` (created with mode
// 0600 if missing; its directory must exist). Outcomes:
//   kAcquired  the lock is held; `record` is what the file held before, and
//              record_for(record) is now its content.
//   kHeld      another open file holds it (in this process or another);
//              `record` is the holder's record as it reads now: "" when the
//              holder has not written it yet.
//   kFailed    the file could not be opened, locked, read or written; nothing
//              is held, `error` and `syscall` say why.
// If record_for throws, nothing is held and the exception propagates.
LockAttempt TryLockFile(const std::string& path,
                        const std::function<std::string(std::string_view previous)>& record_for);

}  // namespace lua_tasks
