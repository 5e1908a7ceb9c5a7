// SPDX-License-Identifier: MIT
// StoreMark: a store directory's high-water mark, kept outside the database and its WAL.
#include "core/store/store_mark.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>
#include <utility>

#include "core/base/crc32c.hpp"
#include "core/store/store_db.hpp"

namespace lua_tasks {

namespace {

constexpr size_t kSlotSize = 64;
constexpr off_t kSlotOffset[2] = {0, 512};
constexpr size_t kRecord = 20;  // "LTMK", u32 version, u64 count, u32 crc
constexpr uint32_t kMarkVersion = 1;
constexpr std::chrono::milliseconds kSyncInterval{1000};

uint32_t Little(uint32_t v) {
  if constexpr (std::endian::native == std::endian::big) return __builtin_bswap32(v);
  return v;
}
uint64_t Little(uint64_t v) {
  if constexpr (std::endian::native == std::endian::big) return __builtin_bswap64(v);
  return v;
}

std::array<char, kSlotSize> Encode(int64_t count) {
  std::array<char, kSlotSize> slot{};
  std::memcpy(slot.data(), "LTMK", 4);
  const uint32_t version = Little(kMarkVersion);
  const uint64_t n = Little(static_cast<uint64_t>(count));
  std::memcpy(slot.data() + 4, &version, 4);
  std::memcpy(slot.data() + 8, &n, 8);
  const uint32_t crc = Little(Crc32c::Update(0, std::string_view(slot.data(), 16)));
  std::memcpy(slot.data() + 16, &crc, 4);
  return slot;
}

std::optional<int64_t> Decode(const char* slot) {
  if (std::memcmp(slot, "LTMK", 4) != 0) return std::nullopt;
  uint32_t version;
  uint64_t n;
  uint32_t crc;
  std::memcpy(&version, slot + 4, 4);
  std::memcpy(&n, slot + 8, 8);
  std::memcpy(&crc, slot + 16, 4);
  if (Little(crc) != Crc32c::Update(0, std::string_view(slot, 16))) return std::nullopt;
  if (Little(version) != kMarkVersion) return std::nullopt;
  return static_cast<int64_t>(Little(n));
}

[[noreturn]] void FailIo(const std::string& path, const char* what) {
  const int err = errno;
  throw StoreError(StoreFailure::kIo, SQLITE_IOERR, err,
                   "The store's high-water mark " + path + " failed to " + what + ": " + std::strerror(err));
}

// flock(LOCK_EX) for a scope: orders the writers of several processes.
class FileLockGuard {
 public:
  explicit FileLockGuard(int fd) : fd_(fd) {
    while (flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~FileLockGuard() { flock(fd_, LOCK_UN); }
  FileLockGuard(const FileLockGuard&) = delete;
  FileLockGuard& operator=(const FileLockGuard&) = delete;

 private:
  int fd_;
};

}  // namespace

StoreMark::StoreMark(std::string path) : path_(std::move(path)) {
  fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) FailIo(path_, "open");
  syncer_ = std::thread([this] { SyncLoop(); });
}

StoreMark::~StoreMark() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (syncer_.joinable()) syncer_.join();
  if (fd_ >= 0) close(fd_);
}

std::optional<int64_t> StoreMark::ReadLocked() {
  std::array<char, 512 + kSlotSize> buf{};
  ssize_t n;
  do {
    n = pread(fd_, buf.data(), buf.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) FailIo(path_, "read");
  if (n == 0) return std::nullopt;
  std::optional<int64_t> best;
  for (const off_t at : kSlotOffset) {
    if (static_cast<size_t>(n) < at + kRecord) continue;
    const std::optional<int64_t> v = Decode(buf.data() + at);
    if (v && (!best || *v > *best)) best = v;
  }
  if (!best) {
    throw StoreError(StoreFailure::kCorrupt, 0, 0,
                     "The store's high-water mark " + path_ +
                         " is damaged (no slot checks), so whether the database beside it lost acknowledged "
                         "transactions cannot be told. If the database is known to be whole, delete " +
                         path_ + " and open the store again (a new mark is written).");
  }
  return best;
}

std::optional<int64_t> StoreMark::Read() {
  FileLockGuard lock(fd_);
  return ReadLocked();
}

void StoreMark::WriteLocked(int64_t count) {
  // The slot not holding the highest valid count: a torn write spoils the
  // older record, never the newest one.
  std::array<char, 512 + kSlotSize> buf{};
  ssize_t n;
  do {
    n = pread(fd_, buf.data(), buf.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) FailIo(path_, "read");
  int best_slot = -1;
  int64_t best = 0;
  for (int i = 0; i < 2; i++) {
    if (n < static_cast<ssize_t>(kSlotOffset[i] + kRecord)) continue;
    const std::optional<int64_t> v = Decode(buf.data() + kSlotOffset[i]);
    if (v && (best_slot < 0 || *v > best)) {
      best = *v;
      best_slot = i;
    }
  }
  if (best_slot >= 0 && best >= count) return;
  const std::array<char, kSlotSize> slot = Encode(count);
  const off_t at = kSlotOffset[best_slot == 0 ? 1 : 0];
  ssize_t w;
  do {
    w = pwrite(fd_, slot.data(), slot.size(), at);
  } while (w < 0 && errno == EINTR);
  if (w != static_cast<ssize_t>(slot.size())) FailIo(path_, "write");
}

void StoreMark::Raise(int64_t count) {
  {
    FileLockGuard lock(fd_);
    WriteLocked(count);
  }
  bool was_dirty;
  {
    std::lock_guard lock(mu_);
    was_dirty = std::exchange(dirty_, true);
  }
  // Only a clean mark's syncer waits for this: a dirty one's syncs at the
  // end of its interval anyway. Waking it each raise cost every
  // transaction a futex wake and a thread switch.
  if (!was_dirty) cv_.notify_one();
}

void StoreMark::RaiseDurably(int64_t count) {
  {
    FileLockGuard lock(fd_);
    WriteLocked(count);
  }
  if (fdatasync(fd_) != 0) FailIo(path_, "sync");
  // The new file's name, too: its directory entry.
  const size_t slash = path_.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path_.substr(0, slash);
  const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) FailIo(dir, "open");
  const int rc = fsync(dfd);
  close(dfd);
  if (rc != 0) FailIo(dir, "sync");
}

void StoreMark::SyncLoop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || dirty_; });
    if (!dirty_) return;  // stopping, and everything written is synced
    dirty_ = false;
    lock.unlock();
    // A failed sync leaves the mark lower after a power cut, never higher:
    // nothing to report to a batch that is durable already.
    fdatasync(fd_);
    lock.lock();
    // At most one sync per kSyncInterval: one per transaction, beside the
    // -wal's own, made each transaction ~15% slower (the disk's flushes
    // queue behind each other); once a second costs nothing measurable.
    cv_.wait_for(lock, kSyncInterval, [this] { return stopping_; });
  }
}

}  // namespace lua_tasks
