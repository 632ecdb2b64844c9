// A one-shot event for tests, like absl::Notification but on std::mutex so
// ThreadSanitizer sees the synchronization. Thread-safe.
#ifndef INFER_TESTS_TESTING_NOTIFICATION_H_
#define INFER_TESTS_TESTING_NOTIFICATION_H_

#include <condition_variable>
#include <mutex>

#include "absl/time/time.h"

namespace infer::testing {

class Notification {
 public:
  void Notify() {
    std::lock_guard<std::mutex> lock(mu_);
    notified_ = true;
    cv_.notify_all();
  }
  bool HasBeenNotified() const {
    std::lock_guard<std::mutex> lock(mu_);
    return notified_;
  }
  void WaitForNotification() const {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return notified_; });
  }
  bool WaitForNotificationWithTimeout(absl::Duration timeout) const {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [this] { return notified_; });
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool notified_ = false;
};

}  // namespace infer::testing

#endif  // INFER_TESTS_TESTING_NOTIFICATION_H_
