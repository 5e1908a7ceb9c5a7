// SPDX-License-Identifier: MIT
// Tests for FileLock: one holder per file, across descriptors and processes, and the holder's record.
#include "core/store/file_lock.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

namespace lua_tasks {
namespace {

class FileLockTest : public ::testing::Test {
 protected:
  FileLockTest() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "file_lock_test.XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    path_ = (dir_ / "a.lock").string();
  }
  ~FileLockTest() override { std::filesystem::remove_all(dir_); }

  std::string Content() const {
    std::ifstream in(path_, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }

  // Tries to lock path_, writing `record` if it gets it; counts the records asked for.
  LockAttempt Try(const std::string& record) {
    return TryLockFile(path_, [&](std::string_view) {
      ++records_asked_;
      return record;
    });
  }

  std::filesystem::path dir_;
  std::string path_;
  int records_asked_ = 0;
};

TEST_F(FileLockTest, TheFirstTryCreatesTheFileTakesTheLockAndWritesTheRecord) {
  LockAttempt a = Try("{\"pid\":1}\n");
  ASSERT_EQ(a.outcome, LockOutcome::kAcquired);
  EXPECT_TRUE(a.lock.held());
  EXPECT_EQ(a.record, "");  // nobody held it before
  EXPECT_EQ(Content(), "{\"pid\":1}\n");
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(FileLockTest, ASecondOpenInTheSameProcessIsRefusedAndReadsTheHoldersRecord) {
  LockAttempt a = Try("holder A");
  ASSERT_EQ(a.outcome, LockOutcome::kAcquired);
  LockAttempt b = Try("holder B");
  EXPECT_EQ(b.outcome, LockOutcome::kHeld);
  EXPECT_FALSE(b.lock.held());
  EXPECT_EQ(b.record, "holder A");
  EXPECT_EQ(records_asked_, 1);  // the refused one wrote nothing
  EXPECT_EQ(Content(), "holder A");
}

TEST_F(FileLockTest, ReleaseFreesTheLockAndTheNextHolderReadsWhatThePreviousLeft) {
  LockAttempt a = Try("holder A, token 7");
  ASSERT_EQ(a.outcome, LockOutcome::kAcquired);
  a.lock.Release();
  EXPECT_FALSE(a.lock.held());
  a.lock.Release();  // idempotent
  std::string seen;
  LockAttempt b = TryLockFile(path_, [&](std::string_view previous) {
    seen = previous;
    return std::string("B");
  });
  ASSERT_EQ(b.outcome, LockOutcome::kAcquired);
  EXPECT_EQ(seen, "holder A, token 7");
  EXPECT_EQ(b.record, "holder A, token 7");
  EXPECT_EQ(Content(), "B");  // a shorter record leaves nothing of the longer one behind
}

TEST_F(FileLockTest, AMovedLockStaysHeldUntilItsLastOwnerReleasesIt) {
  LockAttempt a = Try("A");
  ASSERT_EQ(a.outcome, LockOutcome::kAcquired);
  FileLock moved = std::move(a.lock);
  EXPECT_FALSE(a.lock.held());
  a.lock.Release();  // the moved-from object owns nothing
  EXPECT_EQ(Try("B").outcome, LockOutcome::kHeld);
  { FileLock scoped = std::move(moved); }
  EXPECT_EQ(Try("C").outcome, LockOutcome::kAcquired);
}

TEST_F(FileLockTest, AMissingDirectoryFailsAtOpenAndHoldsNothing) {
  path_ = (dir_ / "missing" / "a.lock").string();
  LockAttempt a = Try("A");
  EXPECT_EQ(a.outcome, LockOutcome::kFailed);
  EXPECT_EQ(a.error, ENOENT);
  EXPECT_STREQ(a.syscall, "open");
  EXPECT_FALSE(a.lock.held());
  EXPECT_EQ(records_asked_, 0);
}

TEST_F(FileLockTest, ARecordThatThrowsLeavesTheLockFree) {
  EXPECT_THROW(TryLockFile(path_, [](std::string_view) -> std::string { throw std::runtime_error("no record"); }),
               std::runtime_error);
  EXPECT_EQ(Try("A").outcome, LockOutcome::kAcquired);
}

// The child takes the lock, says so through the pipe and waits to be killed.
pid_t ChildHoldingLock(const std::string& path) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    LockAttempt a = TryLockFile(path, [](std::string_view) { return "child " + std::to_string(getpid()); });
    const char ok = a.outcome == LockOutcome::kAcquired ? 'y' : 'n';
    if (write(ready[1], &ok, 1) != 1) _exit(2);
    for (;;) pause();
  }
  close(ready[1]);
  char ok = 'n';
  const ssize_t n = read(ready[0], &ok, 1);
  close(ready[0]);
  return n == 1 && ok == 'y' ? pid : -1;
}

TEST_F(FileLockTest, ALockHeldByAnotherProcessIsRefusedAndFreedWhenThatProcessIsKilled) {
  const pid_t child = ChildHoldingLock(path_);
  ASSERT_GT(child, 0);
  const std::string record = "child " + std::to_string(child);
  LockAttempt refused = Try("parent");
  EXPECT_EQ(refused.outcome, LockOutcome::kHeld);
  EXPECT_EQ(refused.record, record);

  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status));

  LockAttempt after = Try("parent");
  ASSERT_EQ(after.outcome, LockOutcome::kAcquired);
  EXPECT_EQ(after.record, record);  // the dead holder's record is what the next one reads
}

TEST_F(FileLockTest, AProgramStartedWhileTheLockIsHeldDoesNotInheritIt) {
  LockAttempt a = Try("A");
  ASSERT_EQ(a.outcome, LockOutcome::kAcquired);
  // The write end closes at exec (O_CLOEXEC), so EOF on the read end says
  // the child runs the new program, with only what it inherited.
  int exec_done[2];
  ASSERT_EQ(pipe2(exec_done, O_CLOEXEC), 0);
  const pid_t child = fork();
  if (child == 0) {
    execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(child, 0);
  close(exec_done[1]);
  char byte;
  EXPECT_EQ(read(exec_done[0], &byte, 1), 0);
  close(exec_done[0]);

  a.lock.Release();
  EXPECT_EQ(Try("B").outcome, LockOutcome::kAcquired);  // the running program holds no copy of it
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

}  // namespace
}  // namespace lua_tasks
