#include "bench/loadgen/runner.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace infer::loadgen {

std::string CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return absl::StrCat("CODE_", static_cast<int>(code));
  }
}

namespace {

// The endpoints of LoadOptions::address; INVALID_ARGUMENT for an empty one.
absl::StatusOr<std::vector<std::string>> SplitEndpoints(const std::string& address) {
  std::vector<std::string> endpoints = absl::StrSplit(address, ',');
  for (const std::string& e : endpoints) {
    if (e.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "empty endpoint in '", address, "': give host:port, or several separated by commas"));
    }
  }
  return endpoints;
}

// Shared state of one run; answers arrive on gRPC's threads.
class Run {
 public:
  Run(const LoadOptions& o, LengthMix mix, const std::vector<std::string>& endpoints)
      : o_(o), mix_(std::move(mix)), pool_(o.model, o.format, o.batch) {
    for (const std::string& e : endpoints) result_.endpoints.push_back({e});
    const int channels = std::max<int>(o.channels, static_cast<int>(endpoints.size()));
    for (int i = 0; i < channels; ++i) {
      grpc::ChannelArguments args;
      args.SetMaxReceiveMessageSize(-1);
      args.SetInt("grpc.use_local_subchannel_pool", 1);  // one connection per channel
      args.SetInt("infer.bench.channel", i);             // distinct channels
      const size_t endpoint = static_cast<size_t>(i) % endpoints.size();
      stubs_.push_back(inference::GRPCInferenceService::NewStub(grpc::CreateCustomChannel(
          endpoints[endpoint], grpc::InsecureChannelCredentials(), args)));
      stub_endpoint_.push_back(endpoint);
    }
  }

  absl::Time start() const { return start_; }
  absl::Time measure_from() const { return start_ + o_.warmup; }
  absl::Time end() const { return end_; }
  void set_times(absl::Time start) {
    start_ = start;
    end_ = start + o_.warmup + o_.duration;
  }

  // True once the measured window is over or the request budget is spent.
  bool Done(absl::Time now) const { return now >= end_ || stop_.load(); }
  // True once the request budget is spent.
  bool BudgetSpent() const { return stop_.load(); }
  // When the budget ran out: the last measured answer (or when sending
  // stopped, if later).
  absl::Time budget_window_end() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::max(stopped_at_, last_measured_answer_);
  }
  RequestPool& pool() { return pool_; }

  // Sends one request meant to go at `intended`; `then` runs after its
  // answer is recorded (closed loop: send the next one).
  void Issue(absl::Time intended, std::mt19937_64& rng, std::function<void()> then) {
    const bool measured = intended >= measure_from();
    if (measured && o_.requests > 0 && measured_sent_.fetch_add(1) >= o_.requests) {
      Stop();
      return;
    }
    struct Call {
      grpc::ClientContext ctx;
      inference::ModelInferResponse resp;
    };
    auto call = std::make_shared<Call>();
    call->ctx.set_deadline(absl::ToChronoTime(absl::Now() + o_.timeout));
    const inference::ModelInferRequest& req = pool_.Get(mix_.Sample(rng));
    const size_t channel = next_channel_.fetch_add(1) % stubs_.size();
    const size_t endpoint = stub_endpoint_[channel];
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++outstanding_;
      if (measured) {
        ++result_.sent;
        ++result_.endpoints[endpoint].sent;
      }
    }
    in_callbacks_.fetch_add(1);  // released as the callback's very last step
    stubs_[channel]->async()->ModelInfer(
        &call->ctx, &req, &call->resp,
        [this, call, intended, measured, endpoint,
         then = std::move(then)](grpc::Status status) mutable {
          Record(status, intended, measured, endpoint);
          if (then) then();
          // Release what the callback owns now, not when gRPC destroys it
          // after it returns: the call's context holds the last reference
          // to the channel, and dropping it on a gRPC thread while the run
          // (or the process) is being torn down raced with that teardown.
          // gRPC keeps its own reference to the call until the callback is
          // done, so the context may go here.
          then = nullptr;
          call.reset();
          {
            std::lock_guard<std::mutex> lock(mu_);
            if (--outstanding_ == 0 || outstanding_ < o_.max_outstanding) cv_.notify_all();
          }
          // Nothing of `this` is touched after this: once it reads zero the
          // run may be destroyed.
          in_callbacks_.fetch_sub(1, std::memory_order_release);
        });
  }

  void WaitForRoom() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return outstanding_ < o_.max_outstanding; });
  }

  // Waits until every answer is recorded and every callback has returned.
  void WaitForAll() {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return outstanding_ == 0; });
    }
    while (in_callbacks_.load(std::memory_order_acquire) > 0) std::this_thread::yield();
  }

  // A one-line status of the last interval, for the progress display.
  std::string Progress() {
    std::lock_guard<std::mutex> lock(mu_);
    const absl::Time now = absl::Now();
    const double secs = std::max(1e-9, absl::ToDoubleSeconds(now - last_progress_));
    std::string line = absl::StrFormat(
        "[%5.1fs%s] %lld ok, %lld errors, %.1f req/s, p50 %.2f ms, p99 %.2f ms (last %.0fs), "
        "%lld in flight",
        absl::ToDoubleSeconds(now - start_), now < measure_from() ? " warm-up" : "",
        static_cast<long long>(result_.ok), static_cast<long long>(errors_),
        static_cast<double>(interval_.count()) / secs, interval_.Percentile(50) / 1e6,
        interval_.Percentile(99) / 1e6, secs, static_cast<long long>(outstanding_));
    interval_.Reset();
    last_progress_ = now;
    return line;
  }

  LoadResult TakeResult() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(result_);
  }
  void set_pacing(const OpenLoopResult& p) {
    std::lock_guard<std::mutex> lock(mu_);
    result_.pacing.issued += p.issued;
    result_.pacing.late += p.late;
    result_.pacing.max_lag = std::max(result_.pacing.max_lag, p.max_lag);
  }
  void set_progress_origin(absl::Time t) { last_progress_ = t; }

 private:
  void Record(const grpc::Status& status, absl::Time intended, bool measured, size_t endpoint) {
    const absl::Time now = absl::Now();
    const int64_t ns = absl::ToInt64Nanoseconds(now - intended);
    std::lock_guard<std::mutex> lock(mu_);
    if (status.ok()) interval_.Record(ns);
    if (status.ok() && now >= measure_from() && now <= end_) {
      ++result_.completed_ok;
      result_.completed_rows += pool_.batch();
    }
    if (!measured) return;
    last_measured_answer_ = std::max(last_measured_answer_, now);
    ++result_.codes[status.error_code()];
    EndpointCounts& counts = result_.endpoints[endpoint];
    ++counts.codes[status.error_code()];
    if (status.ok()) ++counts.ok;
    if (!status.ok()) ++errors_;
    if (status.ok()) {
      ++result_.ok;
      result_.rows_ok += pool_.batch();
      result_.ok_latency.Record(ns);
    } else {
      result_.error_latency.Record(ns);
    }
  }

  const LoadOptions& o_;
  const LengthMix mix_;
  RequestPool pool_;
  std::vector<std::unique_ptr<inference::GRPCInferenceService::Stub>> stubs_;
  std::vector<size_t> stub_endpoint_;  // each stub's endpoint
  std::atomic<size_t> next_channel_{0};
  std::atomic<int64_t> measured_sent_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> in_callbacks_{0};
  absl::Time start_, end_;

  void Stop() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stop_.exchange(true)) stopped_at_ = absl::Now();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  int64_t outstanding_ = 0;
  int64_t errors_ = 0;
  LoadResult result_;
  LatencyHistogram interval_;
  absl::Time last_progress_;
  absl::Time stopped_at_;
  absl::Time last_measured_answer_ = absl::InfinitePast();
};

}  // namespace

absl::StatusOr<LoadResult> RunLoad(const LoadOptions& o) {
  if (o.model.empty()) return absl::InvalidArgumentError("a model name is required");
  absl::StatusOr<std::vector<std::string>> endpoints = SplitEndpoints(o.address);
  if (!endpoints.ok()) return endpoints.status();
  if ((o.concurrency > 0) == (o.rate > 0)) {
    return absl::InvalidArgumentError(
        "choose one load: a concurrency (closed loop) or a request rate (open loop)");
  }
  if (o.batch < 1 || o.channels < 1 || o.threads < 1 || o.max_outstanding < 1) {
    return absl::InvalidArgumentError("batch, channels, threads and max outstanding must be >= 1");
  }
  if (o.duration <= absl::ZeroDuration() || o.warmup < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the duration must be positive and the warm-up not negative");
  }
  if (absl::Status s = ValidateRequestFormat(o.format); !s.ok()) return s;
  absl::StatusOr<LengthMix> mix = LengthMix::Parse(o.lengths);
  if (!mix.ok()) return mix.status();
  const int64_t max_bytes_per_request =
      o.format.MaxRequestBytes(std::min<int64_t>(o.batch, int64_t{1} << 20),
                               std::min<int64_t>(mix->max_length(), int64_t{1} << 20));
  if (o.batch > (int64_t{1} << 20) || mix->max_length() > (int64_t{1} << 20) ||
      max_bytes_per_request > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch ", o.batch, " x length ", mix->max_length(),
                     " makes requests over 1 GiB; the load generator keeps them in memory"));
  }
  const std::vector<int64_t> lengths = mix->Values();
  Run run(o, *std::move(mix), *endpoints);
  // Build the requests before the clock starts, so building them is not
  // charged to the first measured request of each length.
  int64_t total_bytes = 0;
  for (int64_t len : lengths) total_bytes += o.format.MaxRequestBytes(o.batch, len);
  if (total_bytes <= (int64_t{256} << 20)) {
    for (int64_t len : lengths) run.pool().Get(len);
  }

  const absl::Time start = absl::Now();
  run.set_times(start);
  run.set_progress_origin(start);
  std::atomic<bool> finished{false};
  std::mutex finished_mu;
  std::condition_variable finished_cv;
  std::thread measure_start;
  if (o.on_measure_start) {
    measure_start = std::thread([&] {
      {
        std::unique_lock<std::mutex> lock(finished_mu);
        finished_cv.wait_until(lock, absl::ToChronoTime(run.measure_from()),
                               [&] { return finished.load(); });
      }
      if (!finished.load()) o.on_measure_start();
    });
  }
  std::thread progress;
  if (o.on_progress) {
    progress = std::thread([&] {
      while (!finished.load()) {
        for (int i = 0; i < 10 && !finished.load(); ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        if (!finished.load()) o.on_progress(run.Progress());
      }
    });
  }

  auto stop_helpers = [&] {
    {
      std::lock_guard<std::mutex> lock(finished_mu);
      finished.store(true);
    }
    finished_cv.notify_all();
    if (progress.joinable()) progress.join();
    if (measure_start.joinable()) measure_start.join();
  };

  if (o.concurrency > 0) {
    // Closed loop: a slot is sent again as soon as its answer is recorded.
    // Answers only hand the slot back; this thread sends, so a server that
    // refuses at once cannot make the callbacks recurse.
    std::mutex ready_mu;
    std::condition_variable ready_cv;
    std::vector<int> ready;
    std::vector<std::mt19937_64> rngs;
    for (int i = 0; i < o.concurrency; ++i) {
      rngs.emplace_back(o.seed + static_cast<uint64_t>(i));
      ready.push_back(i);
    }
    while (true) {
      std::vector<int> batch;
      {
        std::unique_lock<std::mutex> lock(ready_mu);
        ready_cv.wait_for(lock, std::chrono::milliseconds(5), [&] { return !ready.empty(); });
        batch.swap(ready);
      }
      if (run.Done(absl::Now())) break;
      for (int slot : batch) {
        run.Issue(absl::Now(), rngs[static_cast<size_t>(slot)], [&, slot] {
          std::lock_guard<std::mutex> lock(ready_mu);
          ready.push_back(slot);
          ready_cv.notify_one();
        });
      }
    }
    run.WaitForAll();
  } else {
    // Open loop: pacing threads, each with its share of the rate.
    std::vector<std::thread> pacers;
    std::atomic<bool> bad{false};
    absl::Status schedule_error;
    for (int t = 0; t < o.threads; ++t) {
      pacers.emplace_back([&, t] {
        absl::StatusOr<ArrivalSchedule> schedule = ArrivalSchedule::Create(
            o.rate / o.threads, o.arrivals, o.seed * 1000003 + static_cast<uint64_t>(t));
        if (!schedule.ok()) {
          bad.store(true);
          return;
        }
        std::mt19937_64 rng(o.seed + 7919 * static_cast<uint64_t>(t));
        // Threads start a fraction of a gap apart so constant rates interleave.
        const absl::Time t0 = start + absl::Seconds(t / o.rate);
        OpenLoopResult r = RunOpenLoop(
            *schedule, *RealPaceClock(), t0, run.end(), [&] { run.WaitForRoom(); },
            [&](absl::Time intended) { run.Issue(intended, rng, nullptr); },
            // Not the clock: every arrival before the window's end is sent.
            [&] { return run.BudgetSpent(); });
        run.set_pacing(r);
      });
    }
    for (std::thread& t : pacers) t.join();
    run.WaitForAll();
    if (bad.load()) {
      stop_helpers();
      return absl::InvalidArgumentError(absl::StrCat("bad request rate ", o.rate));
    }
  }
  stop_helpers();
  LoadResult result = run.TakeResult();
  result.window = o.duration;
  if (run.BudgetSpent()) {
    // The budget ended the window: every measured answer counts, over the
    // time up to the last of them.
    result.window = run.budget_window_end() - run.measure_from();
    if (result.window <= absl::ZeroDuration()) result.window = absl::Nanoseconds(1);
    result.completed_ok = result.ok;
    result.completed_rows = result.rows_ok;
  }
  return result;
}

}  // namespace infer::loadgen
