// Open-loop pacing: when each request is *meant* to be sent, independent of
// when earlier ones are answered. Latency in open-loop mode is measured from
// these intended times, so a server that stalls is charged for every request
// that should have been sent during the stall, not only for the few that
// were (the "coordinated omission" a closed loop or a blocking sender hides).
//
// Thread-compatible; the clock is an interface so the timing logic is tested
// with a fake one.
#ifndef INFER_BENCH_LOADGEN_PACER_H_
#define INFER_BENCH_LOADGEN_PACER_H_

#include <cstdint>
#include <functional>
#include <random>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace infer::loadgen {

enum class Arrivals { kConstant, kPoisson };

// Intended send times as offsets from the start: constant spacing 1/rate, or
// a Poisson process (exponential gaps of mean 1/rate, seeded).
class ArrivalSchedule {
 public:
  // INVALID_ARGUMENT unless rate > 0.
  static absl::StatusOr<ArrivalSchedule> Create(double rate_per_s, Arrivals kind, uint64_t seed);
  // The offset of the next arrival (non-decreasing).
  absl::Duration Next();

 private:
  ArrivalSchedule(double rate, Arrivals kind, uint64_t seed)
      : rate_(rate), kind_(kind), rng_(seed), gap_(rate) {}
  double rate_;
  Arrivals kind_;
  std::mt19937_64 rng_;
  std::exponential_distribution<double> gap_;
  int64_t n_ = 0;           // arrivals so far (constant)
  double poisson_s_ = 0.0;  // running sum of gaps (Poisson)
};

class PaceClock {
 public:
  virtual ~PaceClock() = default;
  virtual absl::Time Now() = 0;
  virtual void SleepUntil(absl::Time t) = 0;
};
PaceClock* RealPaceClock();

struct OpenLoopResult {
  int64_t issued = 0;
  // How far behind its intended time the sender issued a request (it never
  // skips one: a late request is sent at once and its latency still counts
  // from the intended time).
  absl::Duration max_lag = absl::ZeroDuration();
  int64_t late = 0;  // issued more than 1 ms after the intended time
};

// Sends on schedule from `start` until `end` (or until stop() is true):
// sleeps until each arrival's intended time, calls wait_for_room() (which may
// block while too many requests are outstanding), then issue(intended).
OpenLoopResult RunOpenLoop(ArrivalSchedule& schedule, PaceClock& clock, absl::Time start,
                           absl::Time end, const std::function<void()>& wait_for_room,
                           const std::function<void(absl::Time intended)>& issue,
                           const std::function<bool()>& stop);

}  // namespace infer::loadgen

#endif  // INFER_BENCH_LOADGEN_PACER_H_
