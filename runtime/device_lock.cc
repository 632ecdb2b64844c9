#include "runtime/device_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace infer {
namespace {

// Keeps letters, digits, '-' and '_' so the key is a safe file name.
std::string FileSafe(const std::string& key) {
  std::string out;
  for (char c : key) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_';
    out.push_back(ok ? c : '_');
  }
  return out;
}

std::string ReadHolder(int fd) {
  char buf[32] = {};
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return "";
  std::string text(buf, static_cast<size_t>(n));
  int64_t pid = 0;
  return absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &pid) ? absl::StrCat(pid) : "";
}

}  // namespace

std::string DeviceOwnershipLock::DefaultLockDir() {
  if (const char* env = std::getenv("INFER_LOCK_DIR"); env != nullptr && *env != '\0') return env;
  if (access("/run/lock", W_OK) == 0) return "/run/lock";
  return "/tmp";
}

absl::StatusOr<std::unique_ptr<DeviceOwnershipLock>> DeviceOwnershipLock::Acquire(
    const std::string& key, const std::string& description, const std::string& lock_dir) {
  const std::string dir = lock_dir.empty() ? DefaultLockDir() : lock_dir;
  const std::string path = absl::StrCat(dir, "/infer-device-", FileSafe(key), ".lock");
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot open the device lock file ", path, ": ", std::strerror(errno)));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = ReadHolder(fd);
    close(fd);
    if (err == EWOULDBLOCK) {
      return absl::FailedPreconditionError(absl::StrCat(
          "device ", description, " is already owned by ",
          holder.empty() ? std::string("another process") : absl::StrCat("process ", holder),
          " (lock file ", path, "); one process serves each GPU"));
    }
    return absl::InternalError(absl::StrCat("cannot lock ", path, ": ", std::strerror(err)));
  }
  const std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) != 0 ||
      pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    // The lock holds regardless; only the holder's PID is missing.
  }
  return std::unique_ptr<DeviceOwnershipLock>(new DeviceOwnershipLock(fd, path));
}

DeviceOwnershipLock::~DeviceOwnershipLock() {
  // Clear the PID first so a reader never sees a stale holder; the file stays
  // (removing it could race with a process opening it to lock).
  if (ftruncate(fd_, 0) != 0) {
  }
  close(fd_);
}

}  // namespace infer
