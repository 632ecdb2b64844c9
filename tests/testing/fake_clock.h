// A Clock that only moves when a test advances it. Thread-safe.
#ifndef INFER_TESTS_TESTING_FAKE_CLOCK_H_
#define INFER_TESTS_TESTING_FAKE_CLOCK_H_

#include <mutex>

#include "absl/base/thread_annotations.h"
#include "batching/clock.h"

namespace infer::testing {

class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::UnixEpoch()) : now_(start) {}
  absl::Time Now() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    std::lock_guard<std::mutex> lock(mu_);
    now_ += d;
  }

 private:
  mutable std::mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace infer::testing

#endif  // INFER_TESTS_TESTING_FAKE_CLOCK_H_
