// The runtime on a real GPU: the caching allocator over cudaMalloc with real
// streams and events, and real copy/compute overlap in the device pipeline.
// Every test skips, with the reason, where no GPU is usable.
#include <atomic>
#include <chrono>
#include <cstring>
#include <ctime>
#include <future>

#include "runtime/caching_allocator.h"
#include "runtime/compute_stream.h"
#include "runtime/cuda_device.h"
#include "runtime/pipeline.h"
#include "runtime/staging_pool.h"
#include "tests/gpu/gpu_kernels.cuh"
#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;

constexpr int64_t kMiB = 1 << 20;

class CudaRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const CudaAvailability cuda = ProbeCuda();
    if (cuda.device_count == 0) GTEST_SKIP() << "no GPU: " << cuda.reason;
    auto device = CreateDevice("cuda:0");
    ASSERT_THAT(device, IsOk());
    device_ = *std::move(device);
  }
  std::unique_ptr<CachingAllocator> Allocator(int64_t budget) {
    CachingAllocatorOptions o;
    o.budget_bytes = budget;
    auto a = CachingAllocator::Create(device_.get(), o);
    EXPECT_THAT(a, IsOk());
    return *std::move(a);
  }
  std::unique_ptr<Device> device_;
};

TEST_F(CudaRuntimeTest, AllocatorMemoryIsUsableAndTheBudgetHolds) {
  auto alloc = Allocator(64 * kMiB);
  auto stream = *device_->CreateStream();
  std::vector<void*> blocks;
  for (int i = 0; i < 2; ++i) {
    auto p = alloc->Allocate(30 * kMiB, stream.get());
    ASSERT_THAT(p, IsOk());
    blocks.push_back(*p);
  }
  EXPECT_THAT(alloc->Allocate(30 * kMiB, stream.get()),
              StatusIs(absl::StatusCode::kResourceExhausted, "budget of 67108864 bytes"));
  std::vector<int> host(1024, 7), back(1024, 0);
  ASSERT_THAT(device_->CopyToDevice(blocks[1], host.data(), 4096, stream.get()), IsOk());
  ASSERT_THAT(device_->CopyToHost(back.data(), blocks[1], 4096, stream.get()), IsOk());
  ASSERT_THAT(device_->SynchronizeStream(stream.get()), IsOk());
  EXPECT_EQ(back, host);
  for (void* p : blocks) ASSERT_THAT(alloc->Free(p), IsOk());
  EXPECT_LE(alloc->stats().peak_reserved_bytes, 64 * kMiB);
}

TEST_F(CudaRuntimeTest, AnotherStreamWaitsForTheFreeEvent) {
  auto alloc = Allocator(256 * kMiB);
  auto s1 = *device_->CreateStream();
  auto s2 = *device_->CreateStream();
  auto a = alloc->Allocate(4 * kMiB, s1.get());
  ASSERT_THAT(a, IsOk());
  // A kernel on stream 1 keeps using the block for ~300 ms.
  ASSERT_THAT(CudaStatus(testing::LaunchSpinThenWrite(NativeCudaStream(s1.get()), 300, 42,
                                                      static_cast<int*>(*a)),
                         "spin kernel"),
              IsOk());
  ASSERT_THAT(alloc->Free(*a), IsOk());
  auto b = alloc->Allocate(4 * kMiB, s2.get());
  ASSERT_THAT(b, IsOk());
  EXPECT_NE(*b, *a) << "stream 2 got memory that stream 1's kernel is still writing";
  ASSERT_THAT(device_->SynchronizeStream(s1.get()), IsOk());
  ASSERT_THAT(alloc->Free(*b), IsOk());
  auto c = alloc->Allocate(4 * kMiB, s2.get());
  ASSERT_THAT(c, IsOk());
  EXPECT_TRUE(*c == *a || *c == *b) << "settled blocks are reused";
  ASSERT_THAT(alloc->Free(*c), IsOk());
}

// Proof of overlap on the device: batch 0's kernel polls a device flag that
// only batch 1's host→device copy sets. If the pipeline did not run batch 1's
// upload while batch 0 computes, the kernel would time out (and say so).
class MarkerJob final : public PipelineJob {
 public:
  // `pinned_one`: page-locked host memory holding 1 (a truly asynchronous copy).
  MarkerJob(Device* device, const int* pinned_one, int* marker, int* seen, bool waiter,
            std::promise<int>* result)
      : device_(device),
        pinned_one_(pinned_one),
        marker_(marker),
        seen_(seen),
        waiter_(waiter),
        result_(result) {}
  absl::Status Upload(Stream* stream) override {
    if (waiter_) return absl::OkStatus();
    return device_->CopyToDevice(marker_, pinned_one_, sizeof(int), stream);
  }
  absl::Status Compute(Stream* stream) override {
    if (!waiter_) return absl::OkStatus();
    return CudaStatus(
        testing::LaunchWaitForMarker(NativeCudaStream(stream), marker_, 1, 5000, seen_),
        "wait kernel");
  }
  absl::Status Download(Stream* stream) override {
    if (!waiter_) return absl::OkStatus();
    return device_->CopyToHost(&host_seen_, seen_, sizeof(int), stream);
  }
  void Complete(absl::Status status) override {
    result_->set_value(status.ok() ? (waiter_ ? host_seen_ : 1) : -1);
  }

 private:
  Device* device_;
  const int* pinned_one_;
  int* marker_;
  int* seen_;
  bool waiter_;
  std::promise<int>* result_;
  int host_seen_ = -1;
};

TEST_F(CudaRuntimeTest, PipelineOverlapsTheNextUploadWithCompute) {
  auto alloc = Allocator(64 * kMiB);
  auto setup = *device_->CreateStream();
  auto marker = alloc->Allocate(sizeof(int), setup.get());
  auto seen = alloc->Allocate(sizeof(int), setup.get());
  ASSERT_THAT(marker, IsOk());
  ASSERT_THAT(seen, IsOk());
  static const int kZero = 0;
  ASSERT_THAT(device_->CopyToDevice(*marker, &kZero, sizeof(int), setup.get()), IsOk());
  ASSERT_THAT(device_->SynchronizeStream(setup.get()), IsOk());
  auto staging = HostStagingPool::Create(device_.get(), StagingPoolOptions{});
  ASSERT_THAT(staging, IsOk());
  auto one = (*staging)->Acquire(sizeof(int));
  ASSERT_THAT(one, IsOk());
  *one->as<int>() = 1;
  auto pipeline = DevicePipeline::Create(device_.get(), PipelineOptions{});
  ASSERT_THAT(pipeline, IsOk());
  std::promise<int> r0, r1;
  std::unique_ptr<PipelineJob> waiter =
      std::make_unique<MarkerJob>(device_.get(), one->as<int>(), static_cast<int*>(*marker),
                                  static_cast<int*>(*seen), true, &r0);
  std::unique_ptr<PipelineJob> setter =
      std::make_unique<MarkerJob>(device_.get(), one->as<int>(), static_cast<int*>(*marker),
                                  static_cast<int*>(*seen), false, &r1);
  ASSERT_THAT((*pipeline)->Submit(&waiter), IsOk());
  ASSERT_THAT((*pipeline)->Submit(&setter), IsOk());
  EXPECT_EQ(r0.get_future().get(), 1)
      << "batch 0's kernel never saw batch 1's upload: copies did not overlap compute";
  EXPECT_EQ(r1.get_future().get(), 1);
  (*pipeline)->Shutdown();
  ASSERT_THAT(alloc->Free(*marker), IsOk());
  ASSERT_THAT(alloc->Free(*seen), IsOk());
}

TEST_F(CudaRuntimeTest, CopyStreamsHaveNoGemmHandleComputeStreamsAWorkspace) {
  auto copy = *device_->CreateStream(StreamKind::kCopy);
  EXPECT_EQ(NativeCublasHandle(copy.get()), nullptr);
  GemmArgs g;
  g.m = g.n = g.k = 1;
  EXPECT_THAT(device_->Sgemm(copy.get(), g),
              StatusIs(absl::StatusCode::kFailedPrecondition, "copy stream"));
  auto alloc = Allocator(256 * kMiB);
  auto compute = ComputeStream::Create(device_.get(), alloc.get());
  ASSERT_THAT(compute, IsOk());
  EXPECT_NE(NativeCublasHandle(compute->get()), nullptr);
  EXPECT_EQ(static_cast<size_t>(compute->workspace_bytes()), device_->GemmWorkspaceBytes());
  EXPECT_EQ(alloc->stats().allocated_bytes, compute->workspace_bytes())
      << "the workspace comes from the allocator, once";
}

// A thread waiting for an event sleeps: its CPU time stays far below the
// wall time of the kernel it waits for.
TEST_F(CudaRuntimeTest, EventWaitsSleepInsteadOfSpinning) {
  auto alloc = Allocator(64 * kMiB);
  auto stream = *device_->CreateStream();
  auto out = alloc->Allocate(sizeof(int), stream.get());
  ASSERT_THAT(out, IsOk());
  auto event = *device_->CreateEvent();
  ASSERT_EQ(
      testing::LaunchSpinThenWrite(NativeCudaStream(stream.get()), 300, 1, static_cast<int*>(*out)),
      cudaSuccess);
  ASSERT_THAT(device_->RecordEvent(event.get(), stream.get()), IsOk());
  const std::clock_t cpu0 = std::clock();
  const auto wall0 = std::chrono::steady_clock::now();
  ASSERT_THAT(device_->SynchronizeEvent(event.get()), IsOk());
  const double cpu_s = static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  EXPECT_GT(wall_s, 0.2);
  EXPECT_LT(cpu_s, 0.5 * wall_s) << "the wait spun a core: " << cpu_s << " s CPU in " << wall_s
                                 << " s";
  ASSERT_THAT(alloc->Free(*out), IsOk());
}

TEST_F(CudaRuntimeTest, StagingBuffersArePinned) {
  StagingPoolOptions o;
  auto pool = HostStagingPool::Create(device_.get(), o);
  ASSERT_THAT(pool, IsOk());
  auto buffer = (*pool)->Acquire(1 << 20);
  ASSERT_THAT(buffer, IsOk());
  cudaPointerAttributes attr;
  ASSERT_EQ(cudaPointerGetAttributes(&attr, buffer->data()), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeHost) << "staging memory is not page-locked";
}

}  // namespace
}  // namespace infer
