// A lost device: CUDA's sticky errors are recognised as DeviceLostError
// wherever they surface, and the allocator then recycles nothing. The GPU
// case runs a kernel that writes through a bad pointer, which leaves the
// context unusable: keep it the only GPU test in this binary.
#include <cuda_runtime_api.h>

#include "runtime/caching_allocator.h"
#include "runtime/cuda_device.h"
#include "tests/gpu/gpu_kernels.cuh"
#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;

TEST(DeviceLostTest, StickyCudaErrorsAreDeviceLostOthersAreNot) {
  for (cudaError_t e : {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorECCUncorrectable,
                        cudaErrorIllegalInstruction, cudaErrorMisalignedAddress,
                        cudaErrorHardwareStackError, cudaErrorAssert}) {
    const absl::Status s = CudaStatus(e, "kernel");
    EXPECT_TRUE(IsDeviceLost(s)) << s;
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
    EXPECT_NE(s.message().find("can run nothing more"), absl::string_view::npos) << s;
  }
  for (cudaError_t e : {cudaErrorInvalidValue, cudaErrorMemoryAllocation, cudaErrorNotReady,
                        cudaErrorInvalidConfiguration}) {
    const absl::Status s = CudaStatus(e, "call");
    EXPECT_FALSE(IsDeviceLost(s)) << s;
  }
  EXPECT_FALSE(IsDeviceLost(absl::OkStatus()));
  EXPECT_FALSE(IsDeviceLost(absl::InternalError("plain")));
}

TEST(DeviceLostTest, AnIllegalAddressLosesTheDeviceAndNothingIsRecycled) {
  const CudaAvailability cuda = ProbeCudaDevices();
  if (cuda.device_count == 0) GTEST_SKIP() << "no GPU: " << cuda.reason;
  auto device = CreateCudaDevice(0);
  ASSERT_THAT(device, IsOk());
  auto alloc = CachingAllocator::Create(device->get(), {int64_t{64} << 20});
  ASSERT_THAT(alloc, IsOk());
  auto stream = (*device)->CreateStream();
  ASSERT_THAT(stream, IsOk());
  auto block = (*alloc)->Allocate(1 << 20, stream->get());
  ASSERT_THAT(block, IsOk());
  ASSERT_EQ(testing::LaunchIllegalWrite(NativeCudaStream(stream->get())), cudaSuccess);
  const absl::Status sync = (*device)->SynchronizeStream(stream->get());
  EXPECT_TRUE(IsDeviceLost(sync)) << sync;
  ASSERT_THAT((*alloc)->Free(*block), IsOk());
  EXPECT_GT((*alloc)->stats().lost_bytes, 0) << "a block the lost device may write was recycled";
  auto again = (*alloc)->Allocate(1 << 20, stream->get());
  EXPECT_FALSE(again.ok() && *again == *block);
}

}  // namespace
}  // namespace infer
