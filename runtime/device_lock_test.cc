#include "runtime/device_lock.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;

class DeviceLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("infer_lock_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(DeviceLockTest, SecondOwnerInTheSameProcessIsRefused) {
  auto first = DeviceOwnershipLock::Acquire("GPU-1234", "cuda:0 (test)", dir_.string());
  ASSERT_THAT(first, IsOk());
  EXPECT_THAT(
      DeviceOwnershipLock::Acquire("GPU-1234", "cuda:0 (test)", dir_.string()),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               "device cuda:0 (test) is already owned by process " + std::to_string(getpid())));
  EXPECT_THAT(DeviceOwnershipLock::Acquire("GPU-5678", "cuda:1", dir_.string()), IsOk())
      << "another GPU is another lock";
  first->reset();
  EXPECT_THAT(DeviceOwnershipLock::Acquire("GPU-1234", "cuda:0", dir_.string()), IsOk())
      << "released with its owner";
}

TEST_F(DeviceLockTest, SecondProcessIsRefusedWithTheHoldersPid) {
  int to_child[2], to_parent[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(to_parent), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto lock = DeviceOwnershipLock::Acquire("GPU-abcd", "cuda:0", dir_.string());
    const char ok = lock.ok() ? 'y' : 'n';
    (void)!write(to_parent[1], &ok, 1);
    char c;
    (void)!read(to_child[0], &c, 1);  // hold until the parent has checked
    _exit(0);
  }
  char ok = 0;
  ASSERT_EQ(read(to_parent[0], &ok, 1), 1);
  ASSERT_EQ(ok, 'y');
  EXPECT_THAT(
      DeviceOwnershipLock::Acquire("GPU-abcd", "cuda:0 (NVIDIA X, GPU-abcd)", dir_.string()),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               "device cuda:0 (NVIDIA X, GPU-abcd) is already owned by process " +
                   std::to_string(child) + " (lock file " + dir_.string() +
                   "/infer-device-GPU-abcd.lock); one process serves each GPU"));
  (void)!write(to_child[1], "x", 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  // The holder exited: the lock is free again.
  EXPECT_THAT(DeviceOwnershipLock::Acquire("GPU-abcd", "cuda:0", dir_.string()), IsOk());
}

TEST_F(DeviceLockTest, AKilledHolderLeavesNoLockBehind) {
  int to_parent[2];
  ASSERT_EQ(pipe(to_parent), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto lock = DeviceOwnershipLock::Acquire("GPU-dead", "cuda:0", dir_.string());
    const char ok = lock.ok() ? 'y' : 'n';
    (void)!write(to_parent[1], &ok, 1);
    pause();  // until killed
    _exit(0);
  }
  char ok = 0;
  ASSERT_EQ(read(to_parent[0], &ok, 1), 1);
  ASSERT_EQ(ok, 'y');
  EXPECT_FALSE(DeviceOwnershipLock::Acquire("GPU-dead", "cuda:0", dir_.string()).ok());
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_THAT(DeviceOwnershipLock::Acquire("GPU-dead", "cuda:0", dir_.string()), IsOk());
}

TEST_F(DeviceLockTest, UnwritableDirectoryIsAnInternalError) {
  EXPECT_THAT(DeviceOwnershipLock::Acquire("GPU-x", "cuda:0", "/nonexistent/dir"),
              StatusIs(absl::StatusCode::kInternal, "cannot open the device lock file"));
}

}  // namespace
}  // namespace infer
