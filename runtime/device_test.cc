#include "runtime/device.h"

#include <vector>

#include "runtime/caching_allocator.h"
#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::StatusIs;

TEST(DeviceTest, CreateRejectsMalformedSpecs) {
  for (const char* spec : {"gpu", "cuda", "cuda:", "cuda:-1", "cuda:x", "CPU"}) {
    EXPECT_THAT(CreateDevice(spec),
                StatusIs(absl::StatusCode::kInvalidArgument, "is not 'cpu' or 'cuda:N'"))
        << spec;
  }
}

TEST(DeviceTest, MissingGpuIsAFailedPreconditionWithAReason) {
  if (ProbeCuda().device_count > 0) GTEST_SKIP() << "a GPU is present";
  EXPECT_THAT(CreateDevice("cuda:0"),
              StatusIs(absl::StatusCode::kFailedPrecondition, "device 'cuda:0' requested but"));
  EXPECT_EQ(DefaultDeviceSpec(), "cpu");
  EXPECT_FALSE(ProbeCuda().reason.empty());
}

// Runs on every device the machine has: the CPU always, each GPU if present.
std::vector<std::string> Specs() {
  std::vector<std::string> specs = {"cpu"};
  if (ProbeCuda().device_count > 0) specs.push_back("cuda:0");
  return specs;
}

TEST(DeviceTest, CopiesRoundTripAndGemmMatchesReference) {
  for (const std::string& spec : Specs()) {
    SCOPED_TRACE(spec);
    auto device = CreateDevice(spec);
    ASSERT_TRUE(device.ok()) << device.status();
    Device* d = device->get();
    auto stream = d->CreateStream();
    ASSERT_TRUE(stream.ok());
    // C[2,3] = A[2,4] * B[4,3] (row-major), and with A transposed in memory.
    const std::vector<float> a = {1, 2, 3, 4, 5, 6, 7, 8};
    const std::vector<float> b = {1, 0, 2, 0, 1, 3, 1, 1, 0, 2, -1, 1};
    std::vector<float> expect(6, 0.0f);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 4; ++k) expect[i * 3 + j] += a[i * 4 + k] * b[k * 3 + j];
    auto alloc = CachingAllocator::Create(d, CachingAllocatorOptions{});
    ASSERT_TRUE(alloc.ok());
    Stream* s = stream->get();
    auto da = DeviceBuffer::Allocate(alloc->get(), a.size() * 4, s);
    auto db = DeviceBuffer::Allocate(alloc->get(), b.size() * 4, s);
    auto dc = DeviceBuffer::Allocate(alloc->get(), 6 * 4, s);
    ASSERT_TRUE(da.ok() && db.ok() && dc.ok());
    ASSERT_TRUE(d->CopyToDevice(da->get(), a.data(), a.size() * 4, s).ok());
    ASSERT_TRUE(d->CopyToDevice(db->get(), b.data(), b.size() * 4, s).ok());
    GemmArgs g;
    g.m = 2, g.n = 3, g.k = 4;
    g.a = da->as<float>(), g.lda = 4;
    g.b = db->as<float>(), g.ldb = 3;
    g.c = dc->as<float>(), g.ldc = 3;
    ASSERT_TRUE(d->Sgemm(s, g).ok());
    std::vector<float> c(6);
    ASSERT_TRUE(d->CopyToHost(c.data(), dc->get(), 24, s).ok());
    auto event = d->CreateEvent();
    ASSERT_TRUE(event.ok());
    ASSERT_TRUE(d->RecordEvent(event->get(), s).ok());
    ASSERT_TRUE(d->SynchronizeEvent(event->get()).ok());
    for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(c[i], expect[i]) << i;
  }
}

TEST(CudaDeviceTest, ReportsNameUuidAndMemory) {
  const CudaAvailability cuda = ProbeCuda();
  if (cuda.device_count == 0) GTEST_SKIP() << "no GPU: " << cuda.reason;
  auto device = CreateDevice("cuda:0");
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ((*device)->info().kind, DeviceKind::kCuda);
  EXPECT_FALSE((*device)->info().name.empty());
  EXPECT_EQ((*device)->info().uuid.rfind("GPU-", 0), 0u) << (*device)->info().uuid;
  EXPECT_GT((*device)->info().total_memory_bytes, int64_t{1} << 30);
}

}  // namespace
}  // namespace infer
