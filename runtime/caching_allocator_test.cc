#include "runtime/caching_allocator.h"

#include <atomic>
#include <cstring>
#include <map>
#include <random>
#include <thread>

#include "tests/testing/fake_device.h"
#include "tests/testing/faulty_device.h"
#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::FakeDevice;
using ::infer::testing::FaultyDevice;
using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;

constexpr int64_t kMiB = 1 << 20;

class AllocatorTest : public ::testing::Test {
 protected:
  // A fake device of `capacity` bytes that reports 1 GiB of total memory
  // (the rest held by "another process").
  void Make(int64_t budget, int64_t capacity = 1024 * kMiB) {
    // What used the previous device goes before it does.
    s1_.reset();
    s2_.reset();
    alloc_.reset();
    faults_.reset();
    auto fake = std::make_unique<FakeDevice>(capacity, 1024 * kMiB);
    device_ = fake.get();
    faults_ = std::make_unique<FaultyDevice>(std::move(fake));
    CachingAllocatorOptions o;
    o.budget_bytes = budget;
    auto a = CachingAllocator::Create(faults_.get(), o);
    ASSERT_THAT(a, IsOk());
    alloc_ = *std::move(a);
    s1_ = *faults_->CreateStream(StreamKind::kCompute);
    s2_ = *faults_->CreateStream(StreamKind::kCompute);
  }
  void* Alloc(size_t bytes, Stream* s) {
    absl::StatusOr<void*> p = alloc_->Allocate(bytes, s);
    EXPECT_THAT(p, IsOk());
    return p.ok() ? *p : nullptr;
  }

  // The fake device's memory and events, behind the fault injector (which
  // owns it) for the tests of refused allocations and a lost device.
  std::unique_ptr<FaultyDevice> faults_;
  FakeDevice* device_ = nullptr;
  std::unique_ptr<CachingAllocator> alloc_;
  std::unique_ptr<Stream> s1_, s2_;
};

TEST(CachingAllocatorStaticTest, RoundsRequests) {
  EXPECT_EQ(CachingAllocator::RoundedSize(0), 512u);
  EXPECT_EQ(CachingAllocator::RoundedSize(1), 512u);
  EXPECT_EQ(CachingAllocator::RoundedSize(512), 512u);
  EXPECT_EQ(CachingAllocator::RoundedSize(513), 1024u);
  EXPECT_EQ(CachingAllocator::RoundedSize(std::numeric_limits<size_t>::max()), 0u);
}

TEST(CachingAllocatorStaticTest, CreateValidatesTheBudget) {
  FakeDevice device(100 * kMiB);
  CachingAllocatorOptions o;
  o.budget_bytes = -1;
  EXPECT_THAT(CachingAllocator::Create(&device, o),
              StatusIs(absl::StatusCode::kInvalidArgument, "must not be negative"));
  o.budget_bytes = 200 * kMiB;
  EXPECT_THAT(CachingAllocator::Create(&device, o),
              StatusIs(absl::StatusCode::kInvalidArgument, "exceeds cuda:7's 104857600 bytes"));
  o.budget_bytes = 0;
  o.budget_fraction = 1.5;
  EXPECT_THAT(CachingAllocator::Create(&device, o),
              StatusIs(absl::StatusCode::kInvalidArgument, "fraction must be in (0, 1]"));
  o.budget_fraction = 0.5;
  auto a = CachingAllocator::Create(&device, o);
  ASSERT_THAT(a, IsOk());
  EXPECT_EQ((*a)->budget_bytes(), 50 * kMiB);
}

TEST_F(AllocatorTest, SmallBlocksShareASegmentAndAreReused) {
  Make(64 * kMiB);
  void* a = Alloc(1000, s1_.get());
  void* b = Alloc(256 * 1024, s1_.get());
  AllocatorStats st = alloc_->stats();
  EXPECT_EQ(st.segments, 1);
  EXPECT_EQ(st.reserved_bytes, 2 * kMiB);
  EXPECT_EQ(st.allocated_bytes, 1024 + 256 * 1024);
  EXPECT_EQ(st.requested_bytes, 1000 + 256 * 1024);
  EXPECT_EQ(static_cast<char*>(b) - static_cast<char*>(a), 1024) << "packed in one segment";
  ASSERT_THAT(alloc_->Free(a), IsOk());
  void* c = Alloc(900, s1_.get());
  EXPECT_EQ(c, a) << "same stream, same size class: the cached block comes back";
  EXPECT_EQ(alloc_->stats().device_allocs, 1u);
  ASSERT_THAT(alloc_->Free(b), IsOk());
  ASSERT_THAT(alloc_->Free(c), IsOk());
  st = alloc_->stats();
  EXPECT_EQ(st.allocated_bytes, 0);
  EXPECT_EQ(st.cached_free_bytes, 2 * kMiB);
  EXPECT_EQ(st.largest_free_block_bytes, 2 * kMiB) << "freed neighbours merged";
  EXPECT_EQ(st.fragmentation, 0.0);
  alloc_->EmptyCache();
  EXPECT_EQ(alloc_->stats().reserved_bytes, 0);
  EXPECT_EQ(device_->used_bytes(), 0);
}

TEST_F(AllocatorTest, LargeRequestsGetTheirOwnRoundedSegments) {
  Make(64 * kMiB);
  void* a = Alloc(3 * kMiB, s1_.get());  // 4 MiB segment; 1 MiB rest is not split off
  AllocatorStats st = alloc_->stats();
  EXPECT_EQ(st.reserved_bytes, 4 * kMiB);
  EXPECT_EQ(st.allocated_bytes, 4 * kMiB);
  void* b = Alloc(5 * kMiB + 1, s1_.get());  // 6 MiB segment; the <1 MiB rest stays
  st = alloc_->stats();
  EXPECT_EQ(st.reserved_bytes, 10 * kMiB);
  EXPECT_EQ(st.segments, 2);
  ASSERT_THAT(alloc_->Free(a), IsOk());
  ASSERT_THAT(alloc_->Free(b), IsOk());
  // A 1.5 MiB request is served by splitting the cached 4 MiB block.
  void* c = Alloc(3 * kMiB / 2, s1_.get());
  EXPECT_EQ(c, a);
  st = alloc_->stats();
  EXPECT_EQ(st.device_allocs, 2u);
  EXPECT_EQ(st.allocated_bytes, 3 * kMiB / 2);
  ASSERT_THAT(alloc_->Free(c), IsOk());
}

TEST_F(AllocatorTest, FragmentationIsMeasuredAndNewSegmentsServeWhatPiecesCannot) {
  Make(64 * kMiB);
  std::vector<void*> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(Alloc(256 * 1024, s1_.get()));
  ASSERT_EQ(alloc_->stats().segments, 1);
  for (int i = 0; i < 8; i += 2) ASSERT_THAT(alloc_->Free(blocks[i]), IsOk());
  AllocatorStats st = alloc_->stats();
  EXPECT_EQ(st.cached_free_bytes, 1 * kMiB);
  EXPECT_EQ(st.largest_free_block_bytes, 256 * 1024);
  EXPECT_DOUBLE_EQ(st.fragmentation, 0.75);
  void* big = Alloc(512 * 1024, s1_.get());  // no 512 KiB hole: a new segment
  EXPECT_EQ(alloc_->stats().segments, 2);
  for (int i = 1; i < 8; i += 2) ASSERT_THAT(alloc_->Free(blocks[i]), IsOk());
  st = alloc_->stats();
  EXPECT_EQ(st.largest_free_block_bytes, 2 * kMiB) << "the first segment merged back whole";
  ASSERT_THAT(alloc_->Free(big), IsOk());
}

TEST_F(AllocatorTest, NeverReservesPastTheBudget) {
  Make(8 * kMiB);
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(Alloc(2 * kMiB, s1_.get()));
  EXPECT_EQ(alloc_->stats().reserved_bytes, 8 * kMiB);
  absl::StatusOr<void*> extra = alloc_->Allocate(1, s1_.get());
  EXPECT_THAT(extra, StatusIs(absl::StatusCode::kResourceExhausted,
                              "out of memory on cuda:7: cannot allocate 1 bytes: a new "
                              "2097152-byte segment does not fit the budget of 8388608 bytes; "
                              "reserved 8388608, allocated 8388608, largest free block 0"));
  EXPECT_THAT(alloc_->Allocate(9 * kMiB, s2_.get()),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "cannot allocate 9437184 bytes: more than the budget of 8388608 bytes"));
  const AllocatorStats st = alloc_->stats();
  EXPECT_EQ(st.ooms, 2u);
  EXPECT_EQ(st.reserved_bytes, 8 * kMiB);
  EXPECT_LE(device_->used_bytes(), 8 * kMiB);
  for (void* p : blocks) ASSERT_THAT(alloc_->Free(p), IsOk());
}

TEST_F(AllocatorTest, OutOfMemoryReleasesCachedSegmentsAndRetries) {
  Make(8 * kMiB);
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(Alloc(2 * kMiB, s1_.get()));
  ASSERT_THAT(alloc_->Free(blocks[1]), IsOk());
  ASSERT_THAT(alloc_->Free(blocks[2]), IsOk());
  // 4 MiB needs a new segment: over budget until the two cached 2 MiB
  // segments (on another stream's terms: whole segments) go back.
  void* big = Alloc(4 * kMiB, s2_.get());
  ASSERT_NE(big, nullptr);
  const AllocatorStats st = alloc_->stats();
  EXPECT_EQ(st.alloc_retries, 1u);
  EXPECT_EQ(st.device_frees, 2u);
  EXPECT_EQ(st.reserved_bytes, 8 * kMiB);
  EXPECT_EQ(st.ooms, 0u);
  for (void* p : {blocks[0], blocks[3], big}) ASSERT_THAT(alloc_->Free(p), IsOk());
}

TEST_F(AllocatorTest, DeviceRefusalUnderBudgetTakesTheSamePath) {
  Make(/*budget=*/64 * kMiB, /*capacity=*/6 * kMiB);
  void* a = Alloc(2 * kMiB, s1_.get());
  void* b = Alloc(2 * kMiB, s1_.get());
  ASSERT_THAT(alloc_->Free(b), IsOk());
  // The device is full (capacity) though the budget is not: release, retry.
  void* c = Alloc(4 * kMiB, s2_.get());
  EXPECT_EQ(alloc_->stats().alloc_retries, 1u);
  EXPECT_EQ(alloc_->stats().device_frees, 1u);
  EXPECT_THAT(alloc_->Allocate(2 * kMiB, s2_.get()),
              StatusIs(absl::StatusCode::kResourceExhausted, "out of memory"));
  ASSERT_THAT(alloc_->Free(c), IsOk());
  alloc_->EmptyCache();
  faults_->FailAllocations(/*skip=*/0, /*count=*/2);
  // The message says the device refused, not the budget, and why.
  EXPECT_THAT(alloc_->Allocate(3 * kMiB, s1_.get()),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "the device refused a new 4194304-byte segment within the budget of "
                       "67108864 bytes (out of memory allocating 4194304 bytes (injected))"));
  ASSERT_THAT(alloc_->Free(a), IsOk());
}

TEST_F(AllocatorTest, AnotherStreamReusesABlockOnlyAfterItsFreeEventCompletes) {
  Make(64 * kMiB);
  device_->set_manual_events(true);
  void* a = Alloc(2 * kMiB, s1_.get());  // a whole segment
  ASSERT_THAT(alloc_->Free(a), IsOk());  // stream 1 may still be using it
  void* b = Alloc(2 * kMiB, s2_.get());
  EXPECT_NE(b, a) << "stream 2 must not get it before stream 1 is done";
  EXPECT_EQ(alloc_->stats().segments, 2);
  void* c = Alloc(2 * kMiB, s1_.get());
  EXPECT_EQ(c, a) << "its own stream reuses it at once";
  ASSERT_THAT(alloc_->Free(c), IsOk());
  device_->CompleteAllEvents();  // stream 1 has passed the free
  void* d = Alloc(2 * kMiB, s2_.get());
  EXPECT_EQ(d, a) << "settled: any stream may reuse it";
  EXPECT_EQ(alloc_->stats().segments, 2);
  ASSERT_THAT(alloc_->Free(b), IsOk());
  ASSERT_THAT(alloc_->Free(d), IsOk());
}

TEST_F(AllocatorTest, UntouchedRestOfASegmentServesAnyStream) {
  Make(64 * kMiB);
  device_->set_manual_events(true);
  void* a = Alloc(4096, s1_.get());
  void* b = Alloc(4096, s2_.get());
  EXPECT_EQ(static_cast<char*>(b) - static_cast<char*>(a), 4096);
  EXPECT_EQ(alloc_->stats().segments, 1);
  ASSERT_THAT(alloc_->Free(a), IsOk());
  ASSERT_THAT(alloc_->Free(b), IsOk());
}

TEST_F(AllocatorTest, CrossStreamUseDefersReuseUntilItsEventCompletes) {
  Make(64 * kMiB);
  device_->set_manual_events(true);
  void* a = Alloc(4096, s1_.get());
  ASSERT_THAT(alloc_->RecordStream(a, s2_.get()), IsOk());
  ASSERT_THAT(alloc_->Free(a), IsOk());
  AllocatorStats st = alloc_->stats();
  EXPECT_EQ(st.allocated_bytes, 0);
  EXPECT_EQ(st.active_bytes, 4096) << "awaiting stream 2";
  void* b = Alloc(4096, s1_.get());
  EXPECT_NE(b, a) << "stream 2 may still be using it";
  ASSERT_THAT(alloc_->Free(b), IsOk());
  device_->CompleteAllEvents();
  void* c = Alloc(4096, s1_.get());
  EXPECT_NE(c, nullptr);
  EXPECT_EQ(alloc_->stats().active_bytes, 4096) << "a settled; only c is active";
  ASSERT_THAT(alloc_->Free(c), IsOk());
  EXPECT_EQ(alloc_->stats().active_bytes, 0);
  EXPECT_EQ(alloc_->stats().cached_free_bytes, 2 * kMiB);
}

TEST_F(AllocatorTest, OutOfMemoryWaitsForPendingCrossStreamFrees) {
  Make(2 * kMiB);
  device_->set_manual_events(true);
  void* a = Alloc(2 * kMiB, s1_.get());
  ASSERT_THAT(alloc_->RecordStream(a, s2_.get()), IsOk());
  ASSERT_THAT(alloc_->Free(a), IsOk());
  void* b = Alloc(2 * kMiB, s1_.get());
  EXPECT_EQ(b, a);
  EXPECT_EQ(device_->event_waits(), 2) << "one per stream that used it";
  EXPECT_EQ(alloc_->stats().alloc_retries, 1u);
  ASSERT_THAT(alloc_->Free(b), IsOk());
}

TEST_F(AllocatorTest, ANewStreamAtADeadStreamsAddressInheritsNothing) {
  Make(64 * kMiB);
  device_->set_manual_events(true);
  auto dying = *device_->CreateStream();
  void* a = Alloc(2 * kMiB, dying.get());
  ASSERT_THAT(alloc_->Free(a), IsOk());  // unsettled: `dying` may still use it
  const uint64_t dead_id = dying->id();
  dying.reset();
  // Streams come and go; whatever lands at the old address gets a new id.
  for (int i = 0; i < 8; ++i) {
    auto fresh = *device_->CreateStream();
    EXPECT_NE(fresh->id(), dead_id);
    void* b = Alloc(2 * kMiB, fresh.get());
    EXPECT_NE(b, a) << "a new stream took a block the dead stream's work may still touch";
    ASSERT_THAT(alloc_->Free(b), IsOk());
  }
  device_->CompleteAllEvents();
}

// The allocator must not hold its lock across device calls that can block
// (cudaMalloc, cudaFree, event waits): another thread's allocation from the
// cache has to go through while one is in progress.
TEST_F(AllocatorTest, DeviceCallsRunWithoutTheAllocatorLock) {
  Make(64 * kMiB);
  void* cached = Alloc(4096, s2_.get());
  ASSERT_THAT(alloc_->Free(cached), IsOk());  // a settled small block stays cached
  std::atomic<int> inside{0}, served{0};
  std::atomic<bool> armed{true};  // the other thread's own device calls pass through
  device_->set_hook([&] {
    if (!armed.exchange(false)) return;
    ++inside;
    std::thread other([&] {
      absl::StatusOr<void*> p = alloc_->Allocate(4096, s2_.get());
      if (p.ok()) {
        ++served;
        alloc_->Free(*p).IgnoreError();
      }
    });
    other.join();  // deadlocks if the caller holds the allocator's lock
    armed = true;
  });
  void* big = Alloc(8 * kMiB, s1_.get());  // a new segment: Device::Allocate
  EXPECT_EQ(inside.load(), 1);
  EXPECT_EQ(alloc_->stats().segments, 2);
  ASSERT_THAT(alloc_->Free(big), IsOk());
  alloc_->EmptyCache();  // Device::Free of both free segments
  device_->set_hook(nullptr);
  EXPECT_EQ(inside.load(), 3);
  EXPECT_EQ(served.load(), 3);
  const AllocatorStats st = alloc_->stats();
  EXPECT_EQ(st.allocated_bytes, 0);
  EXPECT_EQ(st.reserved_bytes, st.segments * 2 * kMiB) << "small segments the other thread made";
}

TEST_F(AllocatorTest, ALostDeviceNeverRecyclesABlock) {
  Make(64 * kMiB);
  device_->set_manual_events(true);
  void* a = Alloc(2 * kMiB, s1_.get());
  ASSERT_THAT(alloc_->Free(a), IsOk());  // its free event is pending
  void* b = Alloc(2 * kMiB, s1_.get());  // reused on its own stream
  EXPECT_EQ(b, a);
  faults_->LoseDevice();
  ASSERT_THAT(alloc_->Free(b), IsOk());  // the event cannot be recorded
  EXPECT_EQ(alloc_->stats().lost_bytes, 2 * kMiB);
  // Nothing the lost device may still be writing is handed out again, and
  // a new segment needs the device: the device's error, not a stale block.
  EXPECT_THAT(alloc_->Allocate(2 * kMiB, s2_.get()),
              StatusIs(absl::StatusCode::kInternal, "illegal memory access"));
  EXPECT_THAT(alloc_->Allocate(2 * kMiB, s1_.get()),
              StatusIs(absl::StatusCode::kInternal, "illegal memory access"));
}

TEST_F(AllocatorTest, ACrossStreamFreePendingWhenTheDeviceIsLostCountsAsLost) {
  Make(64 * kMiB);
  device_->set_manual_events(true);
  void* a = Alloc(2 * kMiB, s1_.get());
  ASSERT_THAT(alloc_->RecordStream(a, s2_.get()), IsOk());
  ASSERT_THAT(alloc_->Free(a), IsOk());  // out of the cache until both streams pass
  EXPECT_EQ(alloc_->stats().active_bytes, 2 * kMiB);
  EXPECT_EQ(alloc_->stats().lost_bytes, 0);
  faults_->LoseDevice();
  alloc_->EmptyCache();  // its events cannot be queried any more
  const AllocatorStats st = alloc_->stats();
  EXPECT_EQ(st.lost_bytes, 2 * kMiB);
  EXPECT_EQ(st.active_bytes, 2 * kMiB) << "still not free: never reused";
  EXPECT_EQ(st.allocated_bytes, 0);
  EXPECT_EQ(st.reserved_bytes, 2 * kMiB) << "its segment is not returned either";
}

TEST_F(AllocatorTest, ForeignAndDoubleFreesAreRefused) {
  Make(64 * kMiB);
  int local = 0;
  EXPECT_THAT(alloc_->Free(&local), StatusIs(absl::StatusCode::kInvalidArgument, "not allocated"));
  void* a = Alloc(10, s1_.get());
  ASSERT_THAT(alloc_->Free(a), IsOk());
  EXPECT_THAT(alloc_->Free(a), StatusIs(absl::StatusCode::kInvalidArgument, "already freed"));
  EXPECT_THAT(alloc_->Allocate(10, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, "stream must not be null"));
}

TEST_F(AllocatorTest, PeaksTrackAndReset) {
  Make(64 * kMiB);
  void* a = Alloc(3 * kMiB, s1_.get());
  ASSERT_THAT(alloc_->Free(a), IsOk());
  AllocatorStats st = alloc_->stats();
  EXPECT_EQ(st.peak_allocated_bytes, 4 * kMiB);
  EXPECT_EQ(st.peak_reserved_bytes, 4 * kMiB);
  alloc_->ResetPeak();
  st = alloc_->stats();
  EXPECT_EQ(st.peak_allocated_bytes, 0);
  EXPECT_EQ(st.peak_reserved_bytes, 4 * kMiB);
}

// Randomized allocate/free against a reference of what is live. Every live
// allocation is filled with its own byte pattern, checked when it is freed:
// overlapping blocks would overwrite each other. After every operation:
// reserved never exceeds the budget and equals what the device holds; the
// stats add up (reserved = active + cached free; requested and live counts
// exact; allocated covers every live block's rounded size).
TEST_F(AllocatorTest, RandomizedAgainstAReferenceModel) {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 6; ++round) {
    const int64_t budget = (8 + static_cast<int64_t>(rng() % 56)) * kMiB;
    Make(budget);
    // Odd rounds: frees settle only when the test completes events (every
    // 50 operations) or the out-of-memory path waits for them.
    device_->set_manual_events(round % 2 == 1);
    struct Live {
      size_t bytes;
      unsigned char pattern;
    };
    std::map<char*, Live> live;
    std::vector<std::unique_ptr<Stream>> streams;
    for (int i = 0; i < 3; ++i) streams.push_back(*device_->CreateStream());
    int64_t ooms = 0;
    for (int op = 0; op < 3000; ++op) {
      if (live.empty() || rng() % 100 < 55) {
        const uint64_t r = rng() % 100;
        const size_t bytes = r < 70   ? 1 + rng() % (64 * 1024)
                             : r < 90 ? 64 * 1024 + rng() % kMiB
                                      : kMiB + rng() % (6 * kMiB);
        Stream* s = streams[rng() % streams.size()].get();
        absl::StatusOr<void*> p = alloc_->Allocate(bytes, s);
        if (!p.ok()) {
          ASSERT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted) << p.status();
          ++ooms;
        } else {
          const unsigned char pattern = static_cast<unsigned char>(rng());
          std::memset(*p, pattern, bytes);
          live[static_cast<char*>(*p)] = {bytes, pattern};
        }
      } else {
        auto it = live.begin();
        std::advance(it, rng() % live.size());
        for (size_t i = 0; i < it->second.bytes; i += 61) {
          ASSERT_EQ(static_cast<unsigned char>(it->first[i]), it->second.pattern)
              << "block overwritten: overlapping allocations";
        }
        ASSERT_THAT(alloc_->Free(it->first), IsOk());
        live.erase(it);
      }
      if (op % 500 == 0) alloc_->EmptyCache();
      if (op % 50 == 0) device_->CompleteAllEvents();
      if (op % 7 == 0 && !live.empty()) {  // some blocks are used by a second stream
        ASSERT_THAT(alloc_->RecordStream(live.begin()->first, streams[op % 3].get()), IsOk());
      }
      const AllocatorStats st = alloc_->stats();
      ASSERT_LE(st.reserved_bytes, budget);
      ASSERT_EQ(st.reserved_bytes, device_->used_bytes());
      ASSERT_EQ(st.reserved_bytes, st.active_bytes + st.cached_free_bytes);
      int64_t requested = 0, rounded = 0;
      char* end = nullptr;
      for (const auto& [ptr, l] : live) {
        ASSERT_GE(ptr, end) << "live blocks overlap";
        end = ptr + l.bytes;
        requested += static_cast<int64_t>(l.bytes);
        rounded += static_cast<int64_t>(CachingAllocator::RoundedSize(l.bytes));
      }
      ASSERT_EQ(st.requested_bytes, requested);
      ASSERT_EQ(st.live_blocks, static_cast<int64_t>(live.size()));
      ASSERT_GE(st.allocated_bytes, rounded);
      ASSERT_LE(st.allocated_bytes, st.reserved_bytes);
      ASSERT_EQ(st.ooms, static_cast<uint64_t>(ooms));
    }
    for (const auto& [ptr, l] : live) ASSERT_THAT(alloc_->Free(ptr), IsOk());
    device_->CompleteAllEvents();  // EmptyCache does not wait for streams
    alloc_->EmptyCache();
    EXPECT_EQ(alloc_->stats().reserved_bytes, 0);
    EXPECT_EQ(device_->used_bytes(), 0);
    EXPECT_EQ(device_->bad_frees(), 0);
  }
}

// Several threads allocating and freeing at once, each on its own stream and
// some sharing one; run under ThreadSanitizer too (see README).
TEST_F(AllocatorTest, ConcurrentStress) {
  Make(96 * kMiB);
  std::unique_ptr<Stream> shared = *device_->CreateStream();
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::atomic<int> corrupt{0}, ooms{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::unique_ptr<Stream> own = *device_->CreateStream();
      std::vector<std::pair<char*, size_t>> mine;
      for (int op = 0; op < 4000; ++op) {
        if (mine.empty() || rng() % 2 == 0) {
          const size_t bytes = rng() % 4 == 0 ? kMiB + rng() % (3 * kMiB) : 1 + rng() % 20000;
          Stream* s = rng() % 3 == 0 ? shared.get() : own.get();
          absl::StatusOr<void*> p = alloc_->Allocate(bytes, s);
          if (!p.ok()) {
            ++ooms;
            continue;
          }
          std::memset(*p, t + 1, bytes);
          mine.emplace_back(static_cast<char*>(*p), bytes);
        } else {
          const size_t i = rng() % mine.size();
          auto [ptr, bytes] = mine[i];
          if (ptr[0] != t + 1 || ptr[bytes - 1] != t + 1) ++corrupt;
          if (!alloc_->Free(ptr).ok()) ++corrupt;
          mine[i] = mine.back();
          mine.pop_back();
        }
      }
      for (auto [ptr, bytes] : mine) {
        if (!alloc_->Free(ptr).ok()) ++corrupt;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(corrupt.load(), 0);
  const AllocatorStats st = alloc_->stats();
  EXPECT_EQ(st.allocated_bytes, 0);
  EXPECT_EQ(st.live_blocks, 0);
  EXPECT_LE(st.peak_reserved_bytes, 96 * kMiB);
  EXPECT_EQ(st.ooms, static_cast<uint64_t>(ooms.load()));
  alloc_->EmptyCache();
  EXPECT_EQ(device_->used_bytes(), 0);
}

}  // namespace
}  // namespace infer
