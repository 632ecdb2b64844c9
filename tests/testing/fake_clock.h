// A Clock that only moves when a test advances it. Thread-safe.
#ifndef INFER_TESTS_TESTING_FAKE_CLOCK_H_
#define INFER_TESTS_TESTING_FAKE_CLOCK_H_

#include "absl/synchronization/mutex.h"
#include "batching/clock.h"

namespace infer::testing {

class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::UnixEpoch()) : now_(start) {}
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace infer::testing

#endif  // INFER_TESTS_TESTING_FAKE_CLOCK_H_
