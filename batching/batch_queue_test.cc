#include "batching/batch_queue.h"

#include <random>
#include <set>

#include "tests/testing/fake_clock.h"
#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::FakeClock;
using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;

struct Task {
  int id = 0;
  int64_t rows = 1;
  int64_t size() const { return rows; }
};

std::unique_ptr<Task> MakeTask(int id, int64_t rows = 1) {
  auto t = std::make_unique<Task>();
  t->id = id;
  t->rows = rows;
  return t;
}

QueueOptions Options(int64_t max_batch, int64_t delay_us, int64_t max_queue) {
  QueueOptions o;
  o.max_batch_size = max_batch;
  o.max_queue_delay = absl::Microseconds(delay_us);
  o.max_queue_size = max_queue;
  return o;
}

std::vector<int> Ids(const std::vector<std::unique_ptr<Task>>& batch) {
  std::vector<int> ids;
  for (const auto& t : batch) ids.push_back(t->id);
  return ids;
}

TEST(BatchQueueTest, LaunchesWhenFullBySize) {
  FakeClock clock;
  BatchQueue<Task> q(Options(4, 1000, 100));
  for (int i = 0; i < 3; ++i) {
    auto t = MakeTask(i);
    ASSERT_THAT(q.Push(&t, clock.Now()), IsOk());
  }
  EXPECT_TRUE(q.PopBatch(clock.Now(), false).empty()) << "3 of 4 rows: not full yet";
  auto t = MakeTask(3);
  ASSERT_THAT(q.Push(&t, clock.Now()), IsOk());
  EXPECT_EQ(Ids(q.PopBatch(clock.Now(), false)), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(q.empty());
}

TEST(BatchQueueTest, LaunchesWhenNextTaskWouldNotFit) {
  FakeClock clock;
  BatchQueue<Task> q(Options(8, 1000, 100));
  auto a = MakeTask(0, 5);
  auto b = MakeTask(1, 4);
  ASSERT_THAT(q.Push(&a, clock.Now()), IsOk());
  ASSERT_THAT(q.Push(&b, clock.Now()), IsOk());
  // 5 + 4 > 8: the first batch is as full as it can get.
  EXPECT_EQ(Ids(q.PopBatch(clock.Now(), false)), std::vector<int>{0});
  EXPECT_TRUE(q.PopBatch(clock.Now(), false).empty());
  EXPECT_EQ(q.queued_rows(), 4);
}

TEST(BatchQueueTest, LaunchesWhenOldestHasWaitedMaxDelay) {
  FakeClock clock;
  BatchQueue<Task> q(Options(32, 1000, 100));
  auto a = MakeTask(0);
  ASSERT_THAT(q.Push(&a, clock.Now()), IsOk());
  EXPECT_EQ(q.NextDeadline(), clock.Now() + absl::Microseconds(1000));
  clock.Advance(absl::Microseconds(600));
  auto b = MakeTask(1);
  ASSERT_THAT(q.Push(&b, clock.Now()), IsOk());
  clock.Advance(absl::Microseconds(399));
  EXPECT_TRUE(q.PopBatch(clock.Now(), false).empty());
  clock.Advance(absl::Microseconds(1));
  // The oldest's deadline governs: both go.
  EXPECT_EQ(Ids(q.PopBatch(clock.Now(), false)), (std::vector<int>{0, 1}));
  EXPECT_EQ(q.NextDeadline(), absl::InfiniteFuture());
}

TEST(BatchQueueTest, ZeroDelayLaunchesAtOnce) {
  FakeClock clock;
  BatchQueue<Task> q(Options(32, 0, 100));
  auto a = MakeTask(0);
  ASSERT_THAT(q.Push(&a, clock.Now()), IsOk());
  EXPECT_EQ(Ids(q.PopBatch(clock.Now(), false)), std::vector<int>{0});
}

TEST(BatchQueueTest, FullQueueRefusesWithUnavailableAndKeepsTheTask) {
  FakeClock clock;
  BatchQueue<Task> q(Options(32, 1000, 2));
  for (int i = 0; i < 2; ++i) {
    auto t = MakeTask(i);
    ASSERT_THAT(q.Push(&t, clock.Now()), IsOk());
  }
  auto extra = MakeTask(7);
  EXPECT_THAT(q.Push(&extra, clock.Now()),
              StatusIs(absl::StatusCode::kUnavailable, "max_queue_size 2"));
  ASSERT_NE(extra, nullptr) << "a refused task stays with the caller";
  EXPECT_EQ(extra->id, 7);
  EXPECT_EQ(q.size(), 2u);
}

TEST(BatchQueueTest, RefusesTasksOutsideBatchLimits) {
  FakeClock clock;
  BatchQueue<Task> q(Options(4, 1000, 10));
  auto big = MakeTask(0, 5);
  EXPECT_THAT(q.Push(&big, clock.Now()),
              StatusIs(absl::StatusCode::kInvalidArgument, "outside [1, 4]"));
  auto empty = MakeTask(1, 0);
  EXPECT_THAT(q.Push(&empty, clock.Now()),
              StatusIs(absl::StatusCode::kInvalidArgument, "outside [1, 4]"));
}

TEST(BatchQueueTest, FlushTakesPartialBatches) {
  FakeClock clock;
  BatchQueue<Task> q(Options(32, 1000000, 10));
  auto a = MakeTask(0);
  ASSERT_THAT(q.Push(&a, clock.Now()), IsOk());
  EXPECT_TRUE(q.PopBatch(clock.Now(), false).empty());
  EXPECT_EQ(Ids(q.PopBatch(clock.Now(), true)), std::vector<int>{0});
}

TEST(BatchQueueTest, ValidatesOptions) {
  EXPECT_THAT(ValidateQueueOptions(Options(0, 1, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, "max_batch_size"));
  EXPECT_THAT(ValidateQueueOptions(Options(1, -1, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, "max_queue_delay"));
  EXPECT_THAT(ValidateQueueOptions(Options(1, 1, 0)),
              StatusIs(absl::StatusCode::kInvalidArgument, "max_queue_size"));
}

// Property: over random arrivals, sizes and clock steps, every accepted task
// leaves in exactly one batch, in FIFO order; no batch exceeds
// max_batch_size; no task waits past max_queue_delay when polled at each
// step; refusals happen only when the queue is full.
TEST(BatchQueueTest, RandomArrivalsEveryTaskExactlyOnce) {
  std::mt19937 rng(1234);
  for (int round = 0; round < 50; ++round) {
    FakeClock clock;
    const int64_t max_batch = 1 + rng() % 16;
    const int64_t delay_us = rng() % 500;
    const int64_t max_queue = 1 + rng() % 40;
    BatchQueue<Task> q(Options(max_batch, delay_us, max_queue));
    std::vector<int> accepted, popped;
    int next_id = 0;
    for (int step = 0; step < 400; ++step) {
      const int arrivals = rng() % 4;
      for (int i = 0; i < arrivals; ++i) {
        auto t = MakeTask(next_id++, 1 + rng() % max_batch);
        const bool was_full = static_cast<int64_t>(q.size()) >= max_queue;
        const int id = t->id;
        absl::Status s = q.Push(&t, clock.Now());
        ASSERT_EQ(s.ok(), !was_full) << s;
        if (s.ok()) accepted.push_back(id);
      }
      clock.Advance(absl::Microseconds(rng() % 200));
      while (true) {
        const absl::Time now = clock.Now();
        const bool overdue = q.NextDeadline() <= now;
        auto batch = q.PopBatch(now, step == 399);
        if (batch.empty()) {
          ASSERT_FALSE(overdue) << "an overdue task was not launched";
          break;
        }
        int64_t rows = 0;
        for (const auto& t : batch) {
          rows += t->rows;
          popped.push_back(t->id);
        }
        ASSERT_LE(rows, max_batch);
      }
    }
    EXPECT_TRUE(q.empty());
    EXPECT_EQ(popped, accepted);  // exactly once each, in arrival order
  }
}

}  // namespace
}  // namespace infer
