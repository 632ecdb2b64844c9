#include "bench/loadgen/pacer.h"

#include <thread>

#include "absl/strings/str_cat.h"

namespace infer::loadgen {

absl::StatusOr<ArrivalSchedule> ArrivalSchedule::Create(double rate_per_s, Arrivals kind,
                                                        uint64_t seed) {
  if (!(rate_per_s > 0.0) || rate_per_s > 1e7) {
    return absl::InvalidArgumentError(
        absl::StrCat("request rate must be in (0, 1e7] per second, got ", rate_per_s));
  }
  return ArrivalSchedule(rate_per_s, kind, seed);
}

absl::Duration ArrivalSchedule::Next() {
  if (kind_ == Arrivals::kConstant) {
    // From the count, not by adding gaps: no drift over millions of requests.
    return absl::Seconds(static_cast<double>(n_++) / rate_);
  }
  const absl::Duration at = absl::Seconds(poisson_s_);
  poisson_s_ += gap_(rng_);
  return at;
}

namespace {

class RealClockImpl final : public PaceClock {
 public:
  absl::Time Now() override { return absl::Now(); }
  void SleepUntil(absl::Time t) override {
    const absl::Duration d = t - absl::Now();
    if (d > absl::ZeroDuration()) std::this_thread::sleep_for(absl::ToChronoNanoseconds(d));
  }
};

}  // namespace

PaceClock* RealPaceClock() {
  static RealClockImpl clock;
  return &clock;
}

OpenLoopResult RunOpenLoop(ArrivalSchedule& schedule, PaceClock& clock, absl::Time start,
                           absl::Time end, const std::function<void()>& wait_for_room,
                           const std::function<void(absl::Time intended)>& issue,
                           const std::function<bool()>& stop) {
  OpenLoopResult r;
  while (!stop()) {
    const absl::Time intended = start + schedule.Next();
    if (intended >= end) break;
    clock.SleepUntil(intended);
    wait_for_room();
    const absl::Duration lag = clock.Now() - intended;
    r.max_lag = std::max(r.max_lag, lag);
    if (lag > absl::Milliseconds(1)) ++r.late;
    issue(intended);
    ++r.issued;
  }
  return r;
}

}  // namespace infer::loadgen
