// Time source for the batcher, injectable so tests can drive time by hand.
// Implementations are thread-safe.
#ifndef INFER_BATCHING_CLOCK_H_
#define INFER_BATCHING_CLOCK_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace infer {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

// The wall clock (absl::Now). A process-wide instance that is never destroyed.
Clock* RealClock();

}  // namespace infer

#endif  // INFER_BATCHING_CLOCK_H_
