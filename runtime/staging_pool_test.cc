#include "runtime/staging_pool.h"

#include <cstring>
#include <thread>

#include "tests/testing/fake_device.h"
#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::FakeDevice;
using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;

std::unique_ptr<HostStagingPool> Pool(Device* d, int64_t max_bytes) {
  StagingPoolOptions o;
  o.max_bytes = max_bytes;
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
                       "in use 786432"));
  EXPECT_THAT(pool->Acquire(2 << 20),
              StatusIs(absl::StatusCode::kResourceExhausted, "larger than the pool"));
  a->Reset();
  // 512 KiB cached + 256 KiB in use; a 512 KiB request reuses the cache.
  auto c = pool->Acquire(300 << 10);
  ASSERT_THAT(c, IsOk());
  b->Reset();
  c->Reset();
  // Cached: 512 + 256 KiB. A 1 MiB buffer fits only after trimming them.
  auto d = pool->Acquire(1 << 20);
  ASSERT_THAT(d, IsOk());
  const StagingPoolStats s = pool->stats();
  EXPECT_LE(s.peak_held_bytes, 1 << 20);
  EXPECT_EQ(s.host_frees, 2u);
  EXPECT_EQ(s.refusals, 2u);
}

TEST(StagingPoolTest, ConcurrentAcquireAndRelease) {
  FakeDevice device(1 << 30);
  auto pool = Pool(&device, 8 << 20);
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
