// BatchQueue's properties over random arrivals: every task leaves exactly
// once, no batch breaks a limit, and no task starves, with and without
// memory pressure.
#include <algorithm>
#include <deque>
#include <map>
#include <random>
#include <set>

#include "batching/batch_queue.h"
#include "batching/batch_queue_test_util.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"

namespace infer {
namespace {

using ::infer::testing::FakeClock;
using namespace ::infer::batch_queue_testing;  // NOLINT: the tests' shared helpers

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
