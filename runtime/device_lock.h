// DeviceOwnershipLock: one process owns each GPU. A cross-process exclusive
// lock (flock) on a file named after the GPU's UUID; the holder's PID is
// written in the file so a refused process can say who holds it. The lock is
// released when the holder exits, however it exits (the kernel drops flock
// locks with the file descriptor), so a crashed server never leaves a GPU
// locked. A second lock on the same key inside one process is refused too.
//
// Thread-safe (immutable after Acquire).
#ifndef INFER_RUNTIME_DEVICE_LOCK_H_
#define INFER_RUNTIME_DEVICE_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace infer {

class DeviceOwnershipLock {
 public:
  // Takes the lock for `key` (e.g. "GPU-8f3c...") in `lock_dir` (empty: the
  // default directory). FAILED_PRECONDITION naming `description` (e.g.
  // "cuda:0 (NVIDIA H100 80GB HBM3, GPU-8f3c...)") and the holder's PID when
  // it is held; INTERNAL when the lock file cannot be opened.
  static absl::StatusOr<std::unique_ptr<DeviceOwnershipLock>> Acquire(
      const std::string& key, const std::string& description, const std::string& lock_dir = "");
  ~DeviceOwnershipLock();
  DeviceOwnershipLock(const DeviceOwnershipLock&) = delete;
  DeviceOwnershipLock& operator=(const DeviceOwnershipLock&) = delete;

  const std::string& path() const { return path_; }

  // $INFER_LOCK_DIR if set, else /run/lock when writable, else /tmp.
  static std::string DefaultLockDir();

 private:
  DeviceOwnershipLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

  const int fd_;
  const std::string path_;
};

}  // namespace infer

#endif  // INFER_RUNTIME_DEVICE_LOCK_H_
