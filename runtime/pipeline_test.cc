#include "runtime/pipeline.h"

#include <atomic>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "runtime/cpu_device.h"
#include "tests/testing/fake_device.h"
#include "tests/testing/notification.h"
#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::FakeDevice;
using ::infer::testing::IsOk;
using ::infer::testing::Notification;
using ::infer::testing::StatusIs;

// A shared record of which stage ran for which job, in order.
struct Log {
  std::mutex mu;
  std::vector<std::pair<int, char>> entries;  // (job, 'U'|'C'|'D'|'X')
  std::map<int, absl::Status> completions;
  void Add(int job, char stage) {
    std::lock_guard<std::mutex> lock(mu);
    entries.emplace_back(job, stage);
  }
};

// Hooks let a test block a stage of one job until something happens.
class TestJob : public PipelineJob {
 public:
  TestJob(int id, Log* log) : id_(id), log_(log) {}
  std::function<absl::Status()> on_upload, on_compute, on_download;
  std::function<void()> on_complete, on_respond;

  absl::Status Upload(Stream*) override { return Run('U', on_upload); }
  absl::Status Compute(Stream*) override { return Run('C', on_compute); }
  absl::Status Download(Stream*) override { return Run('D', on_download); }
  void Complete(absl::Status status) override {
    log_->Add(id_, 'X');
    {
      std::lock_guard<std::mutex> lock(log_->mu);
      log_->completions[id_] = status;
    }
    if (on_complete) on_complete();
  }
  void Respond() override {
    log_->Add(id_, 'R');
    if (on_respond) on_respond();
  }

 private:
  absl::Status Run(char stage, const std::function<absl::Status()>& hook) {
    log_->Add(id_, stage);
    return hook ? hook() : absl::OkStatus();
  }
  int id_;
  Log* log_;
};

std::unique_ptr<DevicePipeline> MakePipeline(Device* device, int max_in_flight) {
  PipelineOptions o;
  o.max_in_flight = max_in_flight;
  auto p = DevicePipeline::Create(device, o);
  EXPECT_THAT(p, IsOk());
  return *std::move(p);
}

TEST(PipelineTest, StagesRunInOrderAndJobsStayFifo) {
  auto cpu = CreateCpuDevice(1);
  Log log;
  auto pipeline = MakePipeline(cpu.get(), 3);
  constexpr int kJobs = 40;
  for (int i = 0; i < kJobs; ++i) {
    std::unique_ptr<PipelineJob> job = std::make_unique<TestJob>(i, &log);
    ASSERT_THAT(pipeline->Submit(&job), IsOk());
  }
  pipeline->Shutdown();
  std::map<char, std::vector<int>> by_stage;
  std::map<int, std::string> by_job;
  for (auto [job, stage] : log.entries) {
    by_stage[stage].push_back(job);
    by_job[job].push_back(stage);
  }
  std::vector<int> expected(kJobs);
  for (int i = 0; i < kJobs; ++i) expected[i] = i;
  for (char stage : {'U', 'C', 'D', 'X'}) EXPECT_EQ(by_stage[stage], expected) << stage;
  for (const auto& [job, stages] : by_job) EXPECT_EQ(stages, "UCDXR") << job;
  const PipelineStats s = pipeline->stats();
  EXPECT_EQ(s.completed, static_cast<uint64_t>(kJobs));
  EXPECT_EQ(s.in_flight, 0);
  EXPECT_LE(s.peak_in_flight, 3);
}

// fuse_stages: one thread runs each job's upload, compute and download, in
// order; jobs stay FIFO; a failed stage still skips the rest.
TEST(PipelineTest, FusedStagesRunOnOneThreadInOrder) {
  auto cpu = CreateCpuDevice(1);
  Log log;
  PipelineOptions o;
  o.fuse_stages = true;
  auto pipeline = DevicePipeline::Create(cpu.get(), o);
  ASSERT_THAT(pipeline, IsOk());
  std::mutex mu;
  std::set<std::thread::id> stage_threads;
  auto note = [&] {
    std::lock_guard<std::mutex> lock(mu);
    stage_threads.insert(std::this_thread::get_id());
    return absl::OkStatus();
  };
  constexpr int kJobs = 20;
  for (int i = 0; i < kJobs; ++i) {
    auto job = std::make_unique<TestJob>(i, &log);
    job->on_upload = note;
    job->on_compute =
        i == 7 ? std::function<absl::Status()>([] { return absl::InternalError("kernel failed"); })
               : std::function<absl::Status()>(note);
    job->on_download = note;
    std::unique_ptr<PipelineJob> j = std::move(job);
    ASSERT_THAT((*pipeline)->Submit(&j), IsOk());
  }
  (*pipeline)->Shutdown();
  std::map<int, std::string> by_job;
  std::vector<int> completed;
  for (auto [job, stage] : log.entries) {
    by_job[job].push_back(stage);
    if (stage == 'X') completed.push_back(job);
  }
  for (const auto& [job, stages] : by_job) {
    EXPECT_EQ(stages, job == 7 ? "UCXR" : "UCDXR") << job;
  }
  std::vector<int> expected(kJobs);
  for (int i = 0; i < kJobs; ++i) expected[i] = i;
  EXPECT_EQ(completed, expected);
  EXPECT_EQ(stage_threads.size(), 1u) << "every stage on the one stage thread";
  EXPECT_THAT(log.completions[7], StatusIs(absl::StatusCode::kInternal, "kernel failed"));
  EXPECT_EQ((*pipeline)->stats().failed, 1u);
}

// Counts arrivals; Arrive blocks until `parties` have arrived (or times out).
class Rendezvous {
 public:
  explicit Rendezvous(int parties) : parties_(parties) {}
  bool Arrive() {
    std::unique_lock<std::mutex> lock(mu_);
    if (++arrived_ == parties_) cv_.notify_all();
    return cv_.wait_for(lock, std::chrono::seconds(20), [&] { return arrived_ >= parties_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  const int parties_;
};

// Proof of overlap that does not depend on timing: job 0's download, job 1's
// compute and job 2's upload each wait until all three are running at once.
// A pipeline that ran stages of different jobs one after another would never
// get all three there (and the rendezvous would time out).
TEST(PipelineTest, UploadComputeAndDownloadOfThreeBatchesOverlap) {
  auto cpu = CreateCpuDevice(1);
  Log log;
  auto pipeline = MakePipeline(cpu.get(), 3);
  Rendezvous all_three(3);
  std::atomic<int> met{0};
  auto meet = [&]() -> absl::Status {
    if (all_three.Arrive()) ++met;
    return absl::OkStatus();
  };
  for (int i = 0; i < 3; ++i) {
    auto job = std::make_unique<TestJob>(i, &log);
    if (i == 0) job->on_download = meet;
    if (i == 1) job->on_compute = meet;
    if (i == 2) job->on_upload = meet;
    std::unique_ptr<PipelineJob> j = std::move(job);
    ASSERT_THAT(pipeline->Submit(&j), IsOk());
  }
  pipeline->Shutdown();
  EXPECT_EQ(met.load(), 3) << "the three stages never ran at the same time";
}

TEST(PipelineTest, SubmitBlocksWhileTheLimitIsInFlight) {
  auto cpu = CreateCpuDevice(1);
  Log log;
  auto pipeline = MakePipeline(cpu.get(), 2);
  Notification release;
  for (int i = 0; i < 2; ++i) {
    auto job = std::make_unique<TestJob>(i, &log);
    job->on_compute = [&] {
      release.WaitForNotification();
      return absl::OkStatus();
    };
    std::unique_ptr<PipelineJob> j = std::move(job);
    ASSERT_THAT(pipeline->Submit(&j), IsOk());
  }
  Notification third_submitted;
  std::thread submitter([&] {
    std::unique_ptr<PipelineJob> j = std::make_unique<TestJob>(2, &log);
    EXPECT_THAT(pipeline->Submit(&j), IsOk());
    third_submitted.Notify();
  });
  EXPECT_FALSE(third_submitted.WaitForNotificationWithTimeout(absl::Milliseconds(200)))
      << "a third job entered a pipeline limited to two";
  EXPECT_EQ(pipeline->stats().in_flight, 2);
  release.Notify();
  EXPECT_TRUE(third_submitted.WaitForNotificationWithTimeout(absl::Seconds(20)));
  submitter.join();
  pipeline->Shutdown();
  EXPECT_EQ(pipeline->stats().completed, 3u);
  EXPECT_EQ(pipeline->stats().peak_in_flight, 2);
}

TEST(PipelineTest, AFailedStageSkipsTheRestAndCompletesWithTheError) {
  auto cpu = CreateCpuDevice(1);
  Log log;
  auto pipeline = MakePipeline(cpu.get(), 3);
  for (int i = 0; i < 3; ++i) {
    auto job = std::make_unique<TestJob>(i, &log);
    if (i == 1) job->on_compute = [] { return absl::ResourceExhaustedError("no memory"); };
    std::unique_ptr<PipelineJob> j = std::move(job);
    ASSERT_THAT(pipeline->Submit(&j), IsOk());
  }
  pipeline->Shutdown();
  std::string stages_of_1;
  for (auto [job, stage] : log.entries) {
    if (job == 1) stages_of_1.push_back(stage);
  }
  EXPECT_EQ(stages_of_1, "UCXR") << "no download after a failed compute";
  EXPECT_THAT(log.completions[0], IsOk());
  EXPECT_THAT(log.completions[1], StatusIs(absl::StatusCode::kResourceExhausted, "no memory"));
  EXPECT_THAT(log.completions[2], IsOk());
  EXPECT_EQ(pipeline->stats().failed, 1u);
}

TEST(PipelineTest, OrderedByEventsWithoutStreamSynchronisation) {
  FakeDevice device(1 << 20);
  device.set_manual_events(true);  // events complete only when waited on
  Log log;
  auto pipeline = MakePipeline(&device, 3);
  for (int i = 0; i < 10; ++i) {
    std::unique_ptr<PipelineJob> j = std::make_unique<TestJob>(i, &log);
    ASSERT_THAT(pipeline->Submit(&j), IsOk());
  }
  pipeline->Shutdown();
  EXPECT_EQ(device.stream_syncs(), 0) << "no stream-wide synchronisation in the hot path";
  EXPECT_EQ(device.stream_waits(), 20) << "compute and download each wait on an event";
  EXPECT_EQ(device.event_waits(), 10) << "completion waits on each job's last event";
}

TEST(PipelineTest, EventsArePooledNotMadePerBatch) {
  FakeDevice device(1 << 20);
  Log log;
  auto pipeline = MakePipeline(&device, 3);
  const int64_t at_start = device.events_created();
  EXPECT_EQ(at_start, 3) << "one per slot, made at start";
  for (int i = 0; i < 50; ++i) {
    std::unique_ptr<PipelineJob> j = std::make_unique<TestJob>(i, &log);
    ASSERT_THAT(pipeline->Submit(&j), IsOk());
  }
  pipeline->Shutdown();
  EXPECT_EQ(device.events_created(), at_start);
}

TEST(PipelineTest, CopyStreamsAndOneComputeStream) {
  // The CPU device ignores kinds; the fake counts nothing either. What can be
  // shown here: a pipeline with an allocator holds the device's GEMM
  // workspace (none on the CPU) and runs.
  auto cpu = CreateCpuDevice(1);
  auto alloc = CachingAllocator::Create(cpu.get(), {int64_t{64} << 20});
  ASSERT_THAT(alloc, IsOk());
  PipelineOptions o;
  o.allocator = alloc->get();
  auto pipeline = DevicePipeline::Create(cpu.get(), o);
  ASSERT_THAT(pipeline, IsOk());
  EXPECT_EQ((*pipeline)->workspace_bytes(), 0);
  FakeDevice other(1 << 20);
  EXPECT_THAT(DevicePipeline::Create(&other, o),
              StatusIs(absl::StatusCode::kInvalidArgument, "another device"));
}

// A job's answers go out after its slot is free: the next batch can be
// submitted while the previous one is still answering.
TEST(PipelineTest, TheSlotIsReleasedBeforeTheJobResponds) {
  auto cpu = CreateCpuDevice(1);
  Log log;
  auto pipeline = MakePipeline(cpu.get(), 1);
  Notification responding, next_submitted;
  auto first = std::make_unique<TestJob>(0, &log);
  first->on_respond = [&] {
    responding.Notify();
    // Slow answering (a slow client, a big response) must not hold the slot.
    EXPECT_TRUE(next_submitted.WaitForNotificationWithTimeout(absl::Seconds(20)));
  };
  std::unique_ptr<PipelineJob> j = std::move(first);
  ASSERT_THAT(pipeline->Submit(&j), IsOk());
  ASSERT_TRUE(responding.WaitForNotificationWithTimeout(absl::Seconds(20)));
  std::unique_ptr<PipelineJob> second = std::make_unique<TestJob>(1, &log);
  ASSERT_THAT(pipeline->Submit(&second), IsOk());  // would block with the slot held
  next_submitted.Notify();
  pipeline->Shutdown();
  std::string order;
  for (auto [job, stage] : log.entries) {
    if (job == 0 && (stage == 'X' || stage == 'R')) order.push_back(stage);
  }
  EXPECT_EQ(order, "XR");
}

TEST(PipelineTest, ShutdownDrainsAndThenRefuses) {
  auto cpu = CreateCpuDevice(1);
  Log log;
  auto pipeline = MakePipeline(cpu.get(), 3);
  for (int i = 0; i < 10; ++i) {
    std::unique_ptr<PipelineJob> j = std::make_unique<TestJob>(i, &log);
    ASSERT_THAT(pipeline->Submit(&j), IsOk());
  }
  pipeline->Shutdown();
  EXPECT_EQ(log.completions.size(), 10u);
  std::unique_ptr<PipelineJob> late = std::make_unique<TestJob>(99, &log);
  EXPECT_THAT(pipeline->Submit(&late), StatusIs(absl::StatusCode::kUnavailable, "shutting down"));
  EXPECT_NE(late, nullptr) << "a refused job stays with the caller";
  pipeline->Shutdown();  // idempotent
}

}  // namespace
}  // namespace infer
