#include "batching/clock.h"

namespace infer {
namespace {

class WallClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

}  // namespace

Clock* RealClock() {
  static Clock* const clock = new WallClock();
  return clock;
}

}  // namespace infer
