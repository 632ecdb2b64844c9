#include "batching/dynamic_batcher.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "tests/testing/notification.h"
#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;

struct Task {
  int id = 0;
  int64_t size() const { return 1; }
  int64_t length() const { return 1; }
  int64_t tokens() const { return 1; }
  int priority() const { return 1; }
  absl::Time deadline() const { return absl::InfiniteFuture(); }
  bool cancelled() const { return false; }
};
using Batch = BatchQueue<Task>::Batch;

// Records the batches it is given.
struct Recorder {
  std::mutex mu;
  std::vector<std::vector<int>> batches ABSL_GUARDED_BY(mu);
  void Process(Batch batch) {
    std::vector<int> ids;
    for (const auto& t : batch.tasks) ids.push_back(t->id);
    std::lock_guard<std::mutex> lock(mu);
    batches.push_back(std::move(ids));
  }
};

BatcherOptions Options(int64_t max_batch, absl::Duration delay, int64_t max_queue) {
  BatcherOptions o;
  o.queue.max_batch_size = max_batch;
  o.queue.max_queue_delay = delay;
  o.queue.max_queue_size = max_queue;
  return o;
}

TEST(DynamicBatcherTest, GroupsConcurrentArrivalsAndAnswersEachOnce) {
  Recorder rec;
  auto batcher = DynamicBatcher<Task>::Create(Options(8, absl::Milliseconds(50), 1000),
                                              [&](Batch b) { rec.Process(std::move(b)); });
  ASSERT_TRUE(batcher.ok());
  constexpr int kTasks = 64;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kTasks / 8; ++i) {
        auto task = std::make_unique<Task>();
        task->id = t * 100 + i;
        ASSERT_THAT((*batcher)->Schedule(&task), IsOk());
      }
    });
  }
  for (auto& th : threads) th.join();
  (*batcher)->Shutdown();
  std::lock_guard<std::mutex> lock(rec.mu);
  std::multiset<int> seen;
  for (const auto& b : rec.batches) {
    EXPECT_LE(b.size(), 8u);
    seen.insert(b.begin(), b.end());
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kTasks));
  for (int id : seen) EXPECT_EQ(seen.count(id), 1u) << id;
  // 64 tasks arriving within the 50 ms window form full batches of 8.
  EXPECT_LT(rec.batches.size(), static_cast<size_t>(kTasks));
}

TEST(DynamicBatcherTest, PartialBatchLeavesAfterTheDelay) {
  ::infer::testing::Notification done;
  std::atomic<int> size{0};
  auto batcher =
      DynamicBatcher<Task>::Create(Options(32, absl::Milliseconds(20), 100), [&](Batch b) {
        size = static_cast<int>(b.tasks.size());
        done.Notify();
      });
  ASSERT_TRUE(batcher.ok());
  const absl::Time start = absl::Now();
  for (int i = 0; i < 3; ++i) {
    auto task = std::make_unique<Task>();
    ASSERT_THAT((*batcher)->Schedule(&task), IsOk());
  }
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(size.load(), 3);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(19)) << "launched before the delay";
}

TEST(DynamicBatcherTest, RefusesWhenFullAndAfterShutdown) {
  ::infer::testing::Notification release, entered;
  auto batcher = DynamicBatcher<Task>::Create(Options(1, absl::ZeroDuration(), 2), [&](Batch) {
    if (!entered.HasBeenNotified()) entered.Notify();
    release.WaitForNotification();
  });
  ASSERT_TRUE(batcher.ok());
  auto first = std::make_unique<Task>();
  ASSERT_THAT((*batcher)->Schedule(&first), IsOk());
  ASSERT_TRUE(entered.WaitForNotificationWithTimeout(absl::Seconds(10)));
  // The worker is busy; two more fill the queue; the next is refused.
  for (int i = 0; i < 2; ++i) {
    auto t = std::make_unique<Task>();
    ASSERT_THAT((*batcher)->Schedule(&t), IsOk());
  }
  auto extra = std::make_unique<Task>();
  EXPECT_THAT((*batcher)->Schedule(&extra),
              StatusIs(absl::StatusCode::kUnavailable, "queue is full"));
  EXPECT_NE(extra, nullptr);
  release.Notify();
  (*batcher)->Shutdown();
  EXPECT_EQ((*batcher)->queue_size(), 0u) << "shutdown drains the queue";
  EXPECT_THAT((*batcher)->Schedule(&extra),
              StatusIs(absl::StatusCode::kUnavailable, "shutting down"));
}

// run_on_caller: a batch ready at Schedule runs on the scheduling thread
// while a worker slot is free; while the only slot is taken (here by a
// caller blocked in process), the next ready batch waits for it instead,
// and the caller holding the slot takes it once its own batch is done.
TEST(DynamicBatcherTest, ReadyBatchesRunOnTheCallerWhileASlotIsFree) {
  ::infer::testing::Notification entered, release;
  std::mutex mu;
  std::vector<std::pair<int, std::thread::id>> ran;  // task id, thread
  BatcherOptions o = Options(1, absl::ZeroDuration(), 10);
  o.run_on_caller = true;
  auto batcher = DynamicBatcher<Task>::Create(o, [&](Batch b) {
    const int id = b.tasks.at(0)->id;
    {
      std::lock_guard<std::mutex> lock(mu);
      ran.emplace_back(id, std::this_thread::get_id());
    }
    if (id == 1) {
      entered.Notify();
      release.WaitForNotification();
    }
  });
  ASSERT_TRUE(batcher.ok());
  auto first = std::make_unique<Task>();
  first->id = 0;
  ASSERT_THAT((*batcher)->Schedule(&first), IsOk());
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(ran.size(), 1u) << "processed before Schedule returned";
    EXPECT_EQ(ran[0].second, std::this_thread::get_id());
  }
  std::thread::id blocker_id;
  std::thread blocker([&] {
    blocker_id = std::this_thread::get_id();
    auto t = std::make_unique<Task>();
    t->id = 1;
    ASSERT_THAT((*batcher)->Schedule(&t), IsOk());  // blocks in process
  });
  ASSERT_TRUE(entered.WaitForNotificationWithTimeout(absl::Seconds(10)));
  auto third = std::make_unique<Task>();
  third->id = 2;
  ASSERT_THAT((*batcher)->Schedule(&third), IsOk());  // returns: the slot is taken
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(ran.size(), 2u) << "one batch at a time (num_workers 1)";
  }
  release.Notify();
  blocker.join();
  (*batcher)->Shutdown();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(ran.size(), 3u);
  EXPECT_EQ(ran[2].first, 2);
  EXPECT_EQ(ran[2].second, blocker_id) << "the caller that freed the slot ran it";
}

// run_on_caller: the caller goes on with what arrived while it processed,
// but for kCallerBatches batches at most; a worker takes the rest.
TEST(DynamicBatcherTest, CallerTakesAtMostABoundedNumberOfBatches) {
  ::infer::testing::Notification entered, release;
  std::mutex mu;
  std::vector<std::thread::id> ran;
  BatcherOptions o = Options(1, absl::ZeroDuration(), 100);
  o.run_on_caller = true;
  auto batcher = DynamicBatcher<Task>::Create(o, [&](Batch b) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ran.push_back(std::this_thread::get_id());
    }
    if (b.tasks.at(0)->id == 0) {
      entered.Notify();
      release.WaitForNotification();
    }
  });
  ASSERT_TRUE(batcher.ok());
  std::thread::id caller_id;
  std::thread caller([&] {
    caller_id = std::this_thread::get_id();
    auto t = std::make_unique<Task>();
    ASSERT_THAT((*batcher)->Schedule(&t), IsOk());
  });
  ASSERT_TRUE(entered.WaitForNotificationWithTimeout(absl::Seconds(10)));
  constexpr int kQueued = 20;
  for (int i = 1; i <= kQueued; ++i) {
    auto t = std::make_unique<Task>();
    t->id = i;
    ASSERT_THAT((*batcher)->Schedule(&t), IsOk());
  }
  release.Notify();
  caller.join();
  (*batcher)->Shutdown();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(ran.size(), 1u + kQueued);
  const auto on_caller = std::count(ran.begin(), ran.end(), caller_id);
  EXPECT_EQ(on_caller, DynamicBatcher<Task>::kCallerBatches);
}

}  // namespace
}  // namespace infer
