#include "runtime/staging_pool.h"

#include <cstring>
#include <thread>
#include <vector>

#include "tests/testing/fake_device.h"
#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::FakeDevice;
using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;

std::unique_ptr<HostStagingPool> Pool(Device* d, int64_t max_bytes, int64_t arena_bytes = 0) {
  StagingPoolOptions o;
  o.max_bytes = max_bytes;
  o.arena_bytes = arena_bytes;
  auto p = HostStagingPool::Create(d, o);
  EXPECT_THAT(p, IsOk());
  return *std::move(p);
}

TEST(StagingPoolTest, SizeClassesArePowersOfTwoFrom64KiB) {
  EXPECT_EQ(HostStagingPool::SizeClass(0), 64u << 10);
  EXPECT_EQ(HostStagingPool::SizeClass(1), 64u << 10);
  EXPECT_EQ(HostStagingPool::SizeClass((64 << 10) + 1), 128u << 10);
  EXPECT_EQ(HostStagingPool::SizeClass(3 << 20), 4u << 20);
}

TEST(StagingPoolTest, BuffersAreReusedAcrossBatches) {
  FakeDevice device(1 << 30);
  auto pool = Pool(&device, 64 << 20);
  void* first = nullptr;
  for (int i = 0; i < 10; ++i) {
    auto b = pool->Acquire(100000 + i);
    ASSERT_THAT(b, IsOk());
    std::memset(b->data(), i, b->size());
    if (i == 0) first = b->data();
    EXPECT_EQ(b->data(), first);
    EXPECT_EQ(b->capacity(), 128u << 10);
  }
  const StagingPoolStats s = pool->stats();
  EXPECT_EQ(s.host_allocs, 1u);
  EXPECT_EQ(s.reuses, 9u);
  EXPECT_EQ(s.arena_hits, 0u);
  EXPECT_EQ(s.in_use_bytes, 0);
  EXPECT_EQ(s.cached_bytes, 128 << 10);
}

TEST(StagingPoolTest, NeverHoldsMoreThanItsBound) {
  FakeDevice device(1 << 30);
  auto pool = Pool(&device, 1 << 20);  // 1 MiB
  auto a = pool->Acquire(512 << 10);
  auto b = pool->Acquire(256 << 10);
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  EXPECT_THAT(pool->Acquire(512 << 10),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "cannot provide 524288 bytes: buffers in use fill the pool; max 1048576, "
                       "arena 0, in use 786432"));
  EXPECT_THAT(pool->Acquire(2 << 20),
              StatusIs(absl::StatusCode::kResourceExhausted, "larger than the pool"));
  a->Reset();
  // 512 KiB cached + 256 KiB in use; a 512 KiB request reuses the cache.
  auto c = pool->Acquire(300 << 10);
  ASSERT_THAT(c, IsOk());
  b->Reset();
  c->Reset();
  // Cached: 512 + 256 KiB. A 1 MiB buffer fits only after unpinning both.
  auto d = pool->Acquire(1 << 20);
  ASSERT_THAT(d, IsOk());
  const StagingPoolStats s = pool->stats();
  EXPECT_LE(s.peak_held_bytes, 1 << 20);
  EXPECT_EQ(s.host_frees, 2u);
  EXPECT_EQ(s.refusals, 2u);
}

TEST(StagingPoolTest, MakingRoomUnpinsOnlyWhatIsNeededLargestFirst) {
  FakeDevice device(1 << 30);
  auto pool = Pool(&device, 3 << 20);  // 3 MiB, no arena
  {
    auto a = pool->Acquire(2 << 20);
    auto b = pool->Acquire(512 << 10);
    auto c = pool->Acquire(256 << 10);
    ASSERT_THAT(a, IsOk());
    ASSERT_THAT(b, IsOk());
    ASSERT_THAT(c, IsOk());
  }                                 // all cached: 2 MiB + 512 KiB + 256 KiB
  auto d = pool->Acquire(1 << 20);  // 2.75 MiB held + 1 MiB: unpin the 2 MiB only
  ASSERT_THAT(d, IsOk());
  const StagingPoolStats s = pool->stats();
  EXPECT_EQ(s.host_frees, 1u);
  EXPECT_EQ(s.cached_bytes, (512 << 10) + (256 << 10));
}

TEST(StagingPoolTest, TheArenaServesEverythingWithoutPinningAfterStart) {
  FakeDevice device(1 << 30);
  auto pool = Pool(&device, 64 << 20, 32 << 20);
  EXPECT_EQ(device.host_allocations(), 1) << "the arena, pinned at start";
  std::vector<StagingBuffer> held;
  for (int round = 0; round < 20; ++round) {
    for (size_t bytes : {size_t{1000}, size_t{100} << 10, size_t{1} << 20, size_t{3} << 20}) {
      auto b = pool->Acquire(bytes + round);
      ASSERT_THAT(b, IsOk());
      std::memset(b->data(), round, b->size());
      held.push_back(*std::move(b));
    }
    if (held.size() > 8) held.erase(held.begin(), held.begin() + 4);
  }
  held.clear();
  const StagingPoolStats s = pool->stats();
  EXPECT_EQ(device.host_allocations(), 1) << "no pinning on the hot path";
  EXPECT_EQ(s.host_allocs, 1u);
  EXPECT_EQ(s.arena_hits, 80u);
  EXPECT_EQ(s.in_use_bytes, 0);
  // Freed buffers merged back: the whole arena is one buffer again.
  auto whole = pool->Acquire(32 << 20);
  ASSERT_THAT(whole, IsOk());
  EXPECT_EQ(pool->stats().arena_hits, 81u);
}

TEST(StagingPoolTest, BuddiesSplitAndMergeInAnArenaOfUnevenSize) {
  FakeDevice device(1 << 30);
  auto pool = Pool(&device, 64 << 20, 3 << 20);  // pieces of 2 MiB and 1 MiB
  std::vector<StagingBuffer> small;
  for (int i = 0; i < 48; ++i) {  // 48 × 64 KiB = the whole arena
    auto b = pool->Acquire(1);
    ASSERT_THAT(b, IsOk());
    small.push_back(*std::move(b));
  }
  EXPECT_EQ(pool->stats().arena_hits, 48u);
  auto overflow = pool->Acquire(1);  // arena full: its own pinned buffer
  ASSERT_THAT(overflow, IsOk());
  EXPECT_EQ(pool->stats().host_allocs, 2u);
  small.clear();
  auto two = pool->Acquire(2 << 20);
  auto one = pool->Acquire(1 << 20);
  ASSERT_THAT(two, IsOk());
  ASSERT_THAT(one, IsOk());
  EXPECT_EQ(pool->stats().arena_hits, 50u) << "both pieces whole again";
  EXPECT_EQ(pool->stats().host_allocs, 2u);
}

TEST(StagingPoolTest, PinningRunsWithoutThePoolLock) {
  FakeDevice device(1 << 30);
  auto pool = Pool(&device, 64 << 20, 1 << 20);
  int inside = 0;
  bool served = false;
  device.set_hook([&] {
    ++inside;
    std::thread other([&] { served = pool->Acquire(1000).ok(); });  // from the arena
    other.join();  // deadlocks if the pool's lock is held here
  });
  auto big = pool->Acquire(4 << 20);  // overflow: pinned now
  ASSERT_THAT(big, IsOk());
  device.set_hook(nullptr);
  EXPECT_EQ(inside, 1);
  EXPECT_TRUE(served);
}

TEST(StagingPoolTest, ArenaOptionsAreChecked) {
  FakeDevice device(1 << 30);
  StagingPoolOptions o;
  o.arena_bytes = -1;
  EXPECT_THAT(HostStagingPool::Create(&device, o),
              StatusIs(absl::StatusCode::kInvalidArgument, "arena_bytes must not be negative"));
  o.max_bytes = 1 << 20;
  o.arena_bytes = 8 << 20;  // clamped to max_bytes
  auto pool = HostStagingPool::Create(&device, o);
  ASSERT_THAT(pool, IsOk());
  EXPECT_EQ((*pool)->stats().arena_bytes, 1 << 20);
}

TEST(StagingPoolTest, ConcurrentAcquireAndRelease) {
  FakeDevice device(1 << 30);
  auto pool = Pool(&device, 8 << 20, 1 << 20);  // the arena and overflow buffers
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        auto b = pool->Acquire(1000 + (i % 7) * 50000);
        if (!b.ok()) continue;
        std::memset(b->data(), t, b->size());
        if (static_cast<char*>(b->data())[b->size() - 1] != t) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  const StagingPoolStats s = pool->stats();
  EXPECT_EQ(s.in_use_bytes, 0);
  EXPECT_LE(s.peak_held_bytes, 8 << 20);
}

}  // namespace
}  // namespace infer
