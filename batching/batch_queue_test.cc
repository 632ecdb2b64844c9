#include "batching/batch_queue.h"

#include <algorithm>
#include <deque>

#include "batching/batch_queue_test_util.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::FakeClock;
using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;
using namespace ::infer::batch_queue_testing;  // NOLINT: the tests' shared helpers

TEST(BatchQueueTest, LaunchesWhenFullBySize) {
  FakeClock clock;
  BatchQueue<Task> q(Options(4, 1000, 100));
  for (int i = 0; i < 3; ++i) {
    auto t = MakeTask(i);
    ASSERT_THAT(q.Push(&t, clock.Now()), IsOk());
  }
  EXPECT_TRUE(q.PopBatch(clock.Now(), false).tasks.empty()) << "3 of 4 rows: not full yet";
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
  EXPECT_TRUE(q.PopBatch(clock.Now(), false).tasks.empty());
  EXPECT_EQ(q.size(), 1u);
}

TEST(BatchQueueTest, LaunchesWhenOldestHasWaitedMaxDelay) {
  FakeClock clock;
  BatchQueue<Task> q(Options(32, 1000, 100));
  auto a = MakeTask(0);
  ASSERT_THAT(q.Push(&a, clock.Now()), IsOk());
  EXPECT_EQ(q.NextDeadline(clock.Now()), clock.Now() + absl::Microseconds(1000));
  clock.Advance(absl::Microseconds(600));
  auto b = MakeTask(1);
  ASSERT_THAT(q.Push(&b, clock.Now()), IsOk());
  clock.Advance(absl::Microseconds(399));
  EXPECT_TRUE(q.PopBatch(clock.Now(), false).tasks.empty());
  clock.Advance(absl::Microseconds(1));
  // The oldest's deadline governs: both go.
  EXPECT_EQ(Ids(q.PopBatch(clock.Now(), false)), (std::vector<int>{0, 1}));
  EXPECT_EQ(q.NextDeadline(clock.Now()), absl::InfiniteFuture());
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
  EXPECT_TRUE(q.PopBatch(clock.Now(), false).tasks.empty());
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

TEST(BatchQueueTest, LengthBucketsNeverMix) {
  FakeClock clock;
  QueueOptions o = Options(4, 1000, 100);
  o.length_buckets = {16, 32, 128};
  BatchQueue<Task> q(o);
  EXPECT_EQ(q.BucketFor(16), 0);
  EXPECT_EQ(q.BucketFor(17), 1);
  EXPECT_EQ(q.BucketFor(128), 2);
  EXPECT_EQ(q.BucketFor(129), -1);
  int id = 0;
  for (int64_t len : {10, 100, 12, 20, 9, 16}) {
    auto t = MakeTask(id++, 1, len);
    ASSERT_THAT(q.Push(&t, clock.Now()), IsOk());
  }
  auto too_long = MakeTask(99, 1, 129);
  EXPECT_THAT(q.Push(&too_long, clock.Now()),
              StatusIs(absl::StatusCode::kInvalidArgument, "longer than the last bucket (128)"));
  // Bucket 0 (ids 0,2,4,5) is full by rows; the others wait for their delay.
  auto first = q.PopBatch(clock.Now(), false);
  EXPECT_EQ(Ids(first), (std::vector<int>{0, 2, 4, 5}));
  EXPECT_EQ(first.length, 16) << "padded to the longest in the batch";
  EXPECT_TRUE(q.PopBatch(clock.Now(), false).tasks.empty());
  clock.Advance(absl::Microseconds(1000));
  std::vector<std::vector<int>> rest;
  while (true) {
    auto b = q.PopBatch(clock.Now(), false);
    if (b.tasks.empty()) break;
    rest.push_back(Ids(b));
  }
  // Oldest head first: id 1 (bucket 2) arrived before id 3 (bucket 1).
  EXPECT_EQ(rest, (std::vector<std::vector<int>>{{1}, {3}}));
}

TEST(BatchQueueTest, PaddedTokensAreBounded) {
  FakeClock clock;
  QueueOptions o = Options(32, 1000, 100);
  o.max_batch_tokens = 64;
  BatchQueue<Task> q(o);
  for (int i = 0; i < 3; ++i) {
    auto t = MakeTask(i, 1, 30);
    ASSERT_THAT(q.Push(&t, clock.Now()), IsOk());
  }
  // 2 × 30 = 60 tokens fit; a third row would make 90.
  EXPECT_EQ(Ids(q.PopBatch(clock.Now(), false)), (std::vector<int>{0, 1}));
  // A single request longer than the token limit still runs, alone.
  auto big = MakeTask(7, 3, 40);
  ASSERT_THAT(q.Push(&big, clock.Now()), IsOk());
  clock.Advance(absl::Milliseconds(1));
  EXPECT_EQ(Ids(q.PopBatch(clock.Now(), false)), (std::vector<int>{2}));
  EXPECT_EQ(Ids(q.PopBatch(clock.Now(), false)), (std::vector<int>{7}));
}

// A model that packs sequences computes only real tokens: max_batch_tokens
// and the memory model count those, not rows × the longest length.
TEST(BatchQueueTest, PackingModelsAreLimitedByRealTokens) {
  FakeClock clock;
  QueueOptions o = Options(32, 1000, 100);
  o.max_batch_tokens = 64;
  FakeGate gate(/*capacity=*/1 << 20, /*bytes_per_token=*/10, /*packs=*/true);
  BatchQueue<Task> q(o, &gate);
  for (int i = 0; i < 8; ++i) {
    auto t = MakeTask(i, 1, 30);
    t->real = i == 0 ? 30 : 5;  // one long row, short ones in the same class
    ASSERT_THAT(q.Push(&t, clock.Now()), IsOk());
  }
  // 30 + 5 × 6 = 60 real tokens fit (padded, 7 × 30 = 210 would not).
  auto b = q.PopBatch(clock.Now(), false);
  EXPECT_EQ(Ids(b), (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(b.tokens, 60);
  EXPECT_EQ(b.computed_tokens, 60);
  EXPECT_EQ(b.length, 30);
  EXPECT_EQ(b.memory.bytes(), 600);
}

// A task that asks for per-token outputs on some of its tokens, and a gate
// that charges them: the batch's shape sums them, the reservation counts
// them, and a task type without state_tokens() counts none.
struct StateTask : Task {
  int64_t states = 0;
  int64_t state_tokens() const { return states; }
};

class StateGate final : public MemoryGate {
 public:
  int64_t PeakBytes(const BatchShape& shape) const override {
    return shape.tokens + 100 * shape.state_tokens;
  }
  int64_t ComputedTokens(const BatchShape& shape) const override { return shape.tokens; }
  int64_t AvailableBytes() const override { return 1 << 20; }
  int64_t CapacityBytes() const override { return 1 << 20; }
  void Claim(int64_t, absl::Time) override {}

 private:
  bool TryReserve(int64_t) override { return true; }
  void Release(int64_t) override {}
};

TEST(BatchQueueTest, StateTokensAreSummedIntoTheShape) {
  FakeClock clock;
  StateGate gate;
  BatchQueue<StateTask> q(Options(32, 1000, 100), &gate);
  for (int i = 0; i < 3; ++i) {
    auto t = std::make_unique<StateTask>();
    t->id = i;
    t->len = 10;
    t->states = i == 1 ? 0 : 10;
    ASSERT_THAT(q.Push(&t, clock.Now()), IsOk());
  }
  auto b = q.PopBatch(clock.Now(), true);
  ASSERT_EQ(b.tasks.size(), 3u);
  EXPECT_EQ(b.state_tokens, 20);
  EXPECT_EQ(b.shape().state_tokens, 20);
  EXPECT_EQ(b.memory.bytes(), 30 + 100 * 20);
  EXPECT_EQ(StateTokensOf(Task()), 0);
}

TEST(BatchQueueTest, BatchesFitTheMemoryThatIsAvailable) {
  FakeClock clock;
  FakeGate gate(/*capacity=*/5000, /*bytes_per_token=*/100);
  BatchQueue<Task> q(Options(32, 1000, 100), &gate);
  for (int i = 0; i < 8; ++i) {
    auto t = MakeTask(i, 1, 10);  // 1000 bytes a row
    ASSERT_THAT(q.Push(&t, clock.Now()), IsOk());
  }
  auto a = q.PopBatch(clock.Now(), false);  // full by memory: 5 rows
  EXPECT_EQ(Ids(a), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(a.memory.bytes(), 5000);
  EXPECT_EQ(gate.AvailableBytes(), 0) << "the batch holds its peak";
  clock.Advance(absl::Milliseconds(5));
  EXPECT_TRUE(q.PopBatch(clock.Now(), true).tasks.empty()) << "no memory until a batch is done";
  a.memory.Release();
  a.memory.Release();  // once only
  EXPECT_EQ(gate.AvailableBytes(), 5000);
  EXPECT_EQ(gate.releases(), 1);
  {
    auto b = q.PopBatch(clock.Now(), false);
    EXPECT_EQ(Ids(b), (std::vector<int>{5, 6, 7}));
    EXPECT_LE(b.memory.bytes(), gate.CapacityBytes());
    EXPECT_EQ(gate.AvailableBytes(), 5000 - b.memory.bytes());
  }  // a batch dropped unreleased returns its memory
  EXPECT_EQ(gate.AvailableBytes(), 5000);
  EXPECT_EQ(gate.releases(), 2);
}

TEST(BatchQueueTest, ATaskThatCanNeverFitIsHandedBack) {
  FakeClock clock;
  FakeGate gate(5000, 100);
  BatchQueue<Task> q(Options(32, 0, 100), &gate);
  auto huge = MakeTask(1, 2, 30);  // 6000 bytes alone
  auto ok = MakeTask(2, 1, 10);
  ASSERT_THAT(q.Push(&huge, clock.Now()), IsOk());
  ASSERT_THAT(q.Push(&ok, clock.Now()), IsOk());
  auto b = q.PopBatch(clock.Now(), false);
  EXPECT_EQ(Ids(b.unfit), std::vector<int>{1});
  EXPECT_EQ(Ids(b), std::vector<int>{2});
}

// The starvation the bound exists for: a long sequence waits for memory
// while short ones, each small enough to fit what is left, keep arriving in
// another bucket. Once it has waited the bound, the short ones stop
// launching, its bytes are claimed through the gate, and it goes as soon as
// the batches in flight return their memory.
TEST(BatchQueueTest, ALongSequenceWaitingForMemoryIsNotStarvedByShortOnes) {
  FakeClock clock;
  FakeGate gate(/*capacity=*/10000, /*bytes_per_token=*/100);
  QueueOptions o = Options(4, 0, 1000);
  o.length_buckets = {8, 64};
  o.priority_aging = absl::Milliseconds(10);  // the bound: max(0, 10 ms)
  BatchQueue<Task> q(o, &gate);
  int next = 100;
  std::deque<MemoryReservation> running;
  auto short_batch = [&] {
    for (int k = 0; k < 2; ++k) {
      auto t = MakeTask(next++, 1, 8);  // 800 bytes each
      EXPECT_THAT(q.Push(&t, clock.Now()), IsOk());
    }
    return q.PopBatch(clock.Now(), false);
  };
  // Four short batches of 1600 bytes hold 6400 of the 10000, and one
  // returns its memory each millisecond while a new one starts: the 6000
  // bytes the long sequence needs are never free at once.
  for (int i = 0; i < 4; ++i) running.push_back(std::move(short_batch().memory));
  auto long_task = MakeTask(1, 1, 60);  // 6000 bytes
  const absl::Time arrived = clock.Now();
  ASSERT_THAT(q.Push(&long_task, clock.Now()), IsOk());
  bool launched = false;
  for (int ms = 1; ms <= 30 && !launched; ++ms) {
    clock.Advance(absl::Milliseconds(1));
    running.pop_front();  // a short batch is done
    auto b = short_batch();
    if (!b.tasks.empty() && b.tasks[0]->id == 1) {
      launched = true;
      EXPECT_GE(clock.Now() - arrived, absl::Milliseconds(10));
      EXPECT_LE(clock.Now() - arrived, absl::Milliseconds(11))
          << "the bound, then one batch in flight ending";
      break;
    }
    if (clock.Now() - arrived < absl::Milliseconds(10)) {
      EXPECT_FALSE(b.tasks.empty()) << "before the bound, short batches go on at " << ms << " ms";
      EXPECT_EQ(gate.claimed(), 0);
      if (!b.tasks.empty()) running.push_back(std::move(b.memory));
    } else {
      EXPECT_TRUE(b.tasks.empty()) << "past the bound, nothing launches ahead of the long one";
      EXPECT_EQ(gate.claimed(), 6000);
      EXPECT_EQ(gate.claimed_since(), arrived);
    }
  }
  EXPECT_TRUE(launched) << "the long sequence starved";
  EXPECT_EQ(gate.claimed(), 0) << "the claim ends when it launches";
  // Shorts that waited meanwhile go next, as memory allows.
  running.clear();
  EXPECT_FALSE(q.PopBatch(clock.Now(), false).tasks.empty());
}

TEST(BatchQueueTest, ExpiredAndCancelledTasksLeaveWithoutRunning) {
  FakeClock clock;
  BatchQueue<Task> q(Options(32, 1000, 100));
  auto a = MakeTask(1);
  a->due = clock.Now() + absl::Microseconds(50);
  auto b = MakeTask(2);
  Task* b_raw = b.get();
  auto c = MakeTask(3);
  ASSERT_THAT(q.Push(&a, clock.Now()), IsOk());
  ASSERT_THAT(q.Push(&b, clock.Now()), IsOk());
  ASSERT_THAT(q.Push(&c, clock.Now()), IsOk());
  EXPECT_EQ(q.NextDeadline(clock.Now()), clock.Now() + absl::Microseconds(50));
  b_raw->gone = true;
  clock.Advance(absl::Microseconds(60));
  auto out = q.PopBatch(clock.Now(), false);
  EXPECT_EQ(Ids(out.expired), std::vector<int>{1});
  EXPECT_EQ(Ids(out.cancelled), std::vector<int>{2});
  EXPECT_TRUE(out.tasks.empty()) << "3 still waits for batch-mates";
  EXPECT_EQ(q.size(), 1u);
}

TEST(BatchQueueTest, HigherPriorityFirstAndAgingBoundsTheWait) {
  FakeClock clock;
  QueueOptions o = Options(1, 0, 100);
  o.priority_levels = 3;
  o.priority_aging = absl::Milliseconds(10);
  BatchQueue<Task> q(o);
  auto low = MakeTask(1, 1, 1, 3);
  ASSERT_THAT(q.Push(&low, clock.Now()), IsOk());
  auto bad = MakeTask(9, 1, 1, 4);
  EXPECT_THAT(q.Push(&bad, clock.Now()),
              StatusIs(absl::StatusCode::kInvalidArgument, "priority 4 is outside [1, 3]"));
  // A flood of urgent requests: one batch (of 1) per millisecond.
  int next = 100;
  std::vector<int> served;
  for (int ms = 0; ms < 20; ++ms) {
    for (int k = 0; k < 2; ++k) {
      auto hi = MakeTask(next++, 1, 1, 1);
      ASSERT_THAT(q.Push(&hi, clock.Now()), IsOk());
    }
    served.push_back(Ids(q.PopBatch(clock.Now(), false)).at(0));
    clock.Advance(absl::Milliseconds(1));
  }
  const auto at = std::find(served.begin(), served.end(), 1);
  ASSERT_NE(at, served.end()) << "the low-priority request starved";
  // Served in the first pop after it had waited the 10 ms aging bound.
  EXPECT_EQ(at - served.begin(), 10);
  EXPECT_LT(served.front(), 1000) << "urgent requests go first";
}

// Deep queues: deadlines leave through the heap whatever their position;
// the tombstones they leave are compacted away without disturbing the
// order of the rest; a cancellation deep in the queue is found by the
// bounded sweep within size / kSweepPerPop calls.
TEST(BatchQueueTest, DeepQueuesExpireCancelAndKeepTheirOrder) {
  FakeClock clock;
  QueueOptions o = Options(4, 1000000, 5000);
  o.priority_levels = 2;
  o.priority_aging = absl::Seconds(100);
  BatchQueue<Task> q(o);
  std::vector<Task*> raw;
  for (int i = 0; i < 3000; ++i) {
    auto t = MakeTask(i, 1, 1, 1 + i % 2);
    // Two of every three expire at 1 ms, in the middle of both FIFOs.
    if (i % 3 != 0) t->due = clock.Now() + absl::Milliseconds(1);
    raw.push_back(t.get());
    ASSERT_THAT(q.Push(&t, clock.Now()), IsOk());
  }
  clock.Advance(absl::Milliseconds(1));
  auto out = q.PopBatch(clock.Now(), false, /*launch=*/false);
  EXPECT_EQ(out.expired.size(), 2000u);
  EXPECT_EQ(q.size(), 1000u);
  // A cancellation near the back is found without a batch being formed.
  raw[2997]->gone = true;
  int calls = 0;
  while (out = q.PopBatch(clock.Now(), false, false), out.cancelled.empty()) {
    ASSERT_LT(++calls, 1000 / static_cast<int>(BatchQueue<Task>::kSweepPerPop) + 4);
  }
  EXPECT_EQ(Ids(out.cancelled), std::vector<int>{2997});
  // The rest leaves level 1 first (even ids), then level 2, each by arrival.
  std::vector<int> order;
  while (!q.empty()) {
    auto b = q.PopBatch(clock.Now(), true);
    ASSERT_FALSE(b.tasks.empty());
    for (int id : Ids(b)) order.push_back(id);
  }
  std::vector<int> want;
  for (int i = 0; i < 3000; i += 6) want.push_back(i);
  for (int i = 3; i < 3000; i += 6) {
    if (i != 2997) want.push_back(i);
  }
  EXPECT_EQ(order, want);
  EXPECT_EQ(q.NextDeadline(clock.Now()), absl::InfiniteFuture());
}

}  // namespace
}  // namespace infer
