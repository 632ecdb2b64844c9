#include "batching/batch_queue.h"

#include <algorithm>
#include <deque>
#include <map>
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
  int64_t len = 1;
  int64_t real = -1;  // real tokens; -1: rows × len (no padding)
  int prio = 1;
  absl::Time due = absl::InfiniteFuture();
  bool gone = false;
  int64_t size() const { return rows; }
  int64_t length() const { return len; }
  int64_t tokens() const { return real >= 0 ? real : rows * len; }
  int priority() const { return prio; }
  absl::Time deadline() const { return due; }
  bool cancelled() const { return gone; }
};

std::unique_ptr<Task> MakeTask(int id, int64_t rows = 1, int64_t len = 1, int prio = 1) {
  auto t = std::make_unique<Task>();
  t->id = id;
  t->rows = rows;
  t->len = len;
  t->prio = prio;
  return t;
}

// Peak = tokens computed × bytes_per_token, where a padding model computes
// rows × length and a packing one its real tokens; `available` shrinks as
// batches reserve and grows when the test releases.
class FakeGate final : public MemoryGate {
 public:
  FakeGate(int64_t capacity, int64_t bytes_per_token, bool packs = false)
      : capacity_(capacity), available_(capacity), per_token_(bytes_per_token), packs_(packs) {}
  int64_t PeakBytes(const BatchShape& shape) const override {
    return ComputedTokens(shape) * per_token_;
  }
  int64_t ComputedTokens(const BatchShape& shape) const override {
    return packs_ ? shape.tokens : shape.padded_tokens();
  }
  int64_t AvailableBytes() const override { return available_; }
  int64_t CapacityBytes() const override { return capacity_; }
  void Claim(int64_t bytes, absl::Time since) override {
    claimed_ = bytes;
    claimed_since_ = since;
    ++claims_;
  }
  int64_t releases() const { return releases_; }
  int64_t claimed() const { return claimed_; }
  absl::Time claimed_since() const { return claimed_since_; }
  int64_t claims() const { return claims_; }

 private:
  bool TryReserve(int64_t bytes) override {
    if (bytes > available_) return false;
    available_ -= bytes;
    return true;
  }
  void Release(int64_t bytes) override {
    available_ += bytes;
    ++releases_;
  }

  int64_t capacity_, available_, per_token_;
  bool packs_;
  int64_t releases_ = 0;
  int64_t claimed_ = 0;
  absl::Time claimed_since_;
  int64_t claims_ = 0;
};

QueueOptions Options(int64_t max_batch, int64_t delay_us, int64_t max_queue) {
  QueueOptions o;
  o.max_batch_size = max_batch;
  o.max_queue_delay = absl::Microseconds(delay_us);
  o.max_queue_size = max_queue;
  return o;
}

std::vector<int> Ids(const std::vector<std::unique_ptr<Task>>& tasks) {
  std::vector<int> ids;
  for (const auto& t : tasks) ids.push_back(t->id);
  return ids;
}
std::vector<int> Ids(const BatchQueue<Task>::Batch& batch) { return Ids(batch.tasks); }

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

// Property: over random arrivals (sizes, lengths, priorities, deadlines,
// cancellations) with a memory gate and batches completing at random, every
// task pushed leaves exactly once (in a batch or as expired / cancelled /
// unfit); no batch exceeds the row, token or memory limits or mixes
// buckets; and whenever all ready batches have been taken, no task that
// could run has waited past max(max_queue_delay, priority_aging).
TEST(BatchQueueTest, RandomArrivalsEveryTaskExactlyOnce) {
  std::mt19937 rng(1234);
  for (int round = 0; round < 40; ++round) {
    FakeClock clock;
    // Odd rounds keep queues short; even ones let them grow deep enough for
    // tombstones to be compacted under the deadline heap's handles.
    const bool deep = round % 2 == 0;
    QueueOptions o = Options(1 + rng() % 16, rng() % 500, 1 + rng() % (deep ? 400 : 40));
    if (rng() % 2) o.length_buckets = {8, 32, 128};
    if (rng() % 2) o.max_batch_tokens = 64 + rng() % 512;
    o.priority_levels = 1 + rng() % 3;
    o.priority_aging = absl::Microseconds(200 + rng() % 800);
    FakeGate gate(/*capacity=*/200000, /*bytes_per_token=*/100, /*packs=*/rng() % 2 == 0);
    BatchQueue<Task> q(o, &gate);
    std::map<int, absl::Time> pushed;
    std::map<int, Task*> live;
    std::set<int> left;
    std::deque<MemoryReservation> in_flight;  // the reservations of running batches
    int next_id = 0;
    auto leave = [&](const std::vector<std::unique_ptr<Task>>& tasks) {
      for (const auto& t : tasks) {
        ASSERT_TRUE(pushed.count(t->id)) << "unknown task";
        ASSERT_TRUE(left.insert(t->id).second) << "task " << t->id << " left twice";
        live.erase(t->id);
      }
    };
    for (int step = 0; step < 300; ++step) {
      for (int i = rng() % (deep ? 12 : 4); i > 0; --i) {
        auto t = MakeTask(next_id++, 1 + rng() % o.max_batch_size, 1 + rng() % 128,
                          1 + rng() % o.priority_levels);
        t->real = t->rows + rng() % (t->rows * (t->len - 1) + 1);  // a row has 1..len tokens
        if (rng() % (deep ? 2 : 10) == 0) t->due = clock.Now() + absl::Microseconds(rng() % 400);
        const int id = t->id;
        Task* raw = t.get();
        if (q.Push(&t, clock.Now()).ok()) {
          pushed[id] = clock.Now();
          live[id] = raw;
        }
      }
      if (!live.empty() && rng() % 8 == 0)
        std::next(live.begin(), rng() % live.size())->second->gone = true;
      clock.Advance(absl::Microseconds(rng() % 200));
      while (!in_flight.empty() && rng() % 2) {
        in_flight.pop_front();
      }
      while (true) {
        auto b = q.PopBatch(clock.Now(), step == 299);
        leave(b.expired);
        leave(b.cancelled);
        leave(b.unfit);
        if (b.tasks.empty()) break;
        int64_t rows = 0, length = 0, tokens = 0;
        for (const auto& t : b.tasks) {
          rows += t->rows;
          length = std::max(length, t->len);
          tokens += t->tokens();
          ASSERT_EQ(q.BucketFor(t->len), static_cast<int>(b.bucket)) << "buckets mixed";
        }
        ASSERT_LE(rows, o.max_batch_size);
        const BatchShape shape{rows, tokens, length};
        ASSERT_EQ(b.tokens, tokens);
        ASSERT_EQ(b.computed_tokens, gate.ComputedTokens(shape));
        if (o.max_batch_tokens > 0 && b.tasks.size() > 1)
          ASSERT_LE(gate.ComputedTokens(shape), o.max_batch_tokens);
        ASSERT_EQ(b.memory.bytes(), gate.PeakBytes(shape));
        in_flight.push_back(std::move(b.memory));
        leave(b.tasks);
      }
      if (in_flight.empty()) {  // nothing holds memory: every ready task had its turn
        const absl::Duration bound = std::max(o.max_queue_delay, o.priority_aging);
        for (const auto& [id, task] : live) {
          ASSERT_LT(clock.Now() - pushed[id], bound) << "task " << id << " starved";
        }
      }
      if (step == 299) {
        while (!in_flight.empty()) {
          in_flight.pop_front();  // the batch is done: its memory returns
        }
        for (int i = 0; i < 1000 && !q.empty(); ++i) {
          auto b = q.PopBatch(clock.Now(), true);
          leave(b.expired);
          leave(b.cancelled);
          leave(b.unfit);
          leave(b.tasks);
          b.memory.Release();
        }
      }
    }
    EXPECT_TRUE(q.empty());
    EXPECT_EQ(left.size(), pushed.size()) << "every accepted task left exactly once";
  }
}

// Under memory pressure: room for a few batches, batches that hold their
// memory for a while, short and long sequences. After a task has waited
// past the starvation bound, every batch that launches holds it or a task
// that arrived before it (so it waits at most for the tasks ahead of it and
// the batches in flight); every task leaves exactly once; and the claim the
// gate sees is always that of the oldest task waiting past the bound for
// memory, or none.
TEST(BatchQueueTest, RandomArrivalsUnderMemoryPressureNeverStarve) {
  std::mt19937 rng(4321);
  int rounds_with_claims = 0;
  for (int round = 0; round < 40; ++round) {
    FakeClock clock;
    QueueOptions o = Options(1 + rng() % 8, rng() % 500, 1000);
    o.length_buckets = {8, 32, 128};
    if (rng() % 2) o.max_batch_tokens = 64 + rng() % 512;
    o.priority_levels = 1 + rng() % 3;
    o.priority_aging = absl::Microseconds(200 + rng() % 800);
    const absl::Duration bound = std::max(o.max_queue_delay, o.priority_aging);
    // Room for one or two long batches.
    FakeGate gate(/*capacity=*/100 * 128 * (1 + rng() % 2) * o.max_batch_size,
                  /*bytes_per_token=*/100, /*packs=*/rng() % 2 == 0);
    BatchQueue<Task> q(o, &gate);
    std::map<int, absl::Time> pushed;
    std::map<int, Task*> live;
    std::set<int> left;
    std::deque<std::pair<absl::Time, MemoryReservation>> in_flight;  // done at, memory
    int next_id = 0;
    auto leave = [&](const std::vector<std::unique_ptr<Task>>& tasks) {
      for (const auto& t : tasks) {
        ASSERT_TRUE(left.insert(t->id).second) << "task " << t->id << " left twice";
        live.erase(t->id);
      }
    };
    auto alone_fits = [&](const Task& t) {
      return gate.PeakBytes({t.rows, t.tokens(), t.len}) <= gate.CapacityBytes();
    };
    for (int step = 0; step < 400; ++step) {
      const bool last = step == 399;
      // Mostly short sequences, sometimes a long one.
      for (int i = rng() % 4; i > 0 && !last; --i) {
        const int64_t len = rng() % 6 == 0 ? 33 + rng() % 96 : 1 + rng() % 8;
        auto t =
            MakeTask(next_id++, 1 + rng() % o.max_batch_size, len, 1 + rng() % o.priority_levels);
        t->real = t->rows + rng() % (t->rows * (t->len - 1) + 1);
        if (rng() % 10 == 0) t->due = clock.Now() + absl::Microseconds(rng() % 2000);
        const int id = t->id;
        Task* raw = t.get();
        if (q.Push(&t, clock.Now()).ok()) {
          pushed[id] = clock.Now();
          live[id] = raw;
        }
      }
      if (!live.empty() && rng() % 16 == 0)
        std::next(live.begin(), rng() % live.size())->second->gone = true;
      clock.Advance(absl::Microseconds(rng() % 200));
      while (!in_flight.empty() && (in_flight.front().first <= clock.Now() || last)) {
        in_flight.pop_front();  // done: its memory returns
      }
      while (true) {
        // The oldest task waiting past the bound that this pop may not drop.
        int oldest = -1;
        for (const auto& [id, t] : live) {
          if (!t->gone && t->due > clock.Now() && alone_fits(*t) &&
              clock.Now() - pushed[id] >= bound) {
            oldest = id;
            break;  // ids grow with arrival
          }
        }
        auto b = q.PopBatch(clock.Now(), last);
        leave(b.expired);
        leave(b.cancelled);
        leave(b.unfit);
        if (b.tasks.empty()) break;
        int first = b.tasks[0]->id;
        for (const auto& t : b.tasks) first = std::min(first, t->id);
        if (oldest >= 0) {
          ASSERT_LE(first, oldest) << "a batch went ahead of task " << oldest << ", which had "
                                   << "waited past the bound (round " << round << ")";
        }
        ASSERT_LE(b.memory.bytes(), gate.CapacityBytes());
        in_flight.emplace_back(clock.Now() + absl::Microseconds(100 + rng() % 900),
                               std::move(b.memory));
        leave(b.tasks);
      }
      if (gate.claimed() > 0) {
        ASSERT_GE(clock.Now() - gate.claimed_since(), bound);
        ASSERT_LE(gate.claimed(), gate.CapacityBytes());
      }
    }
    for (int i = 0; i < 1000 && !q.empty(); ++i) {
      in_flight.clear();
      auto b = q.PopBatch(clock.Now(), true);
      leave(b.expired);
      leave(b.cancelled);
      leave(b.unfit);
      leave(b.tasks);
    }
    EXPECT_TRUE(q.empty());
    EXPECT_EQ(left.size(), pushed.size()) << "every accepted task left exactly once";
    EXPECT_EQ(gate.claimed(), 0) << "no claim outlives the tasks";
    if (gate.claims() > 0) ++rounds_with_claims;
  }
  EXPECT_GE(rounds_with_claims, 20) << "memory was rarely short enough to test the bound";
}

}  // namespace
}  // namespace infer
