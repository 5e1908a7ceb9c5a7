// SPDX-License-Identifier: MIT
// FileLock: an exclusive OS lock on a file that dies with its holder, and the record naming that holder.
#include "core/store/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace lua_tasks {

namespace {

// Reads up to kMaxLockRecord bytes from the start of fd. False with errno set on failure.
bool ReadRecord(int fd, std::string* out) {
  out->assign(kMaxLockRecord, '\0');
  size_t got = 0;
  while (got < kMaxLockRecord) {
    const ssize_t n = pread(fd, out->data() + got, kMaxLockRecord - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  out->resize(got);
  return true;
}

// Replaces the file's content with `record`, setting *syscall on failure.
// Written first and cut to length after, not truncated first: a refused
// opener reading meanwhile sees the old record or the new one (with at most
// the old one's tail behind it), never an empty file.
bool WriteRecord(int fd, std::string_view record, const char** syscall) {
  size_t put = 0;
  while (put < record.size()) {
    const ssize_t n = pwrite(fd, record.data() + put, record.size() - put, static_cast<off_t>(put));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *syscall = "write";
      return false;
    }
    put += static_cast<size_t>(n);
  }
  if (ftruncate(fd, static_cast<off_t>(record.size())) != 0) {
    *syscall = "ftruncate";
    return false;
  }
  return true;
}

LockAttempt Failed(const char* syscall) {
  const int error = errno;
  LockAttempt a;
  a.outcome = LockOutcome::kFailed;
  a.error = error;
  a.syscall = syscall;
  return a;
}

}  // namespace

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    Release();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void FileLock::Release() {
  if (fd_ < 0) return;
  // Not retried on EINTR: on Linux the descriptor is gone either way, and a
  // second close could close a descriptor another thread just opened.
  close(fd_);
  fd_ = -1;
}

LockAttempt TryLockFile(const std::string& path,
                        const std::function<std::string(std::string_view previous)>& record_for) {
  int fd;
  do {
    fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return Failed("open");
  FileLock lock(fd);  // from here on the descriptor closes on every path

  int rc;
  do {
    rc = flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  LockAttempt a;
  if (rc != 0 && errno != EWOULDBLOCK) return Failed("flock");
  if (!ReadRecord(fd, &a.record)) return Failed("read");
  if (rc != 0) {
    a.outcome = LockOutcome::kHeld;
    return a;
  }
  const std::string record = record_for(a.record);
  if (!WriteRecord(fd, record, &a.syscall)) return Failed(a.syscall);
  a.outcome = LockOutcome::kAcquired;
  a.lock = std::move(lock);
  return a;
}

}  // namespace lua_tasks
