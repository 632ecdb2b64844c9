// A device with its caching allocator, for tests that create models without
// an Engine. Not thread-safe to construct; the context it hands out is.
#ifndef INFER_TESTS_TESTING_TEST_DEVICE_H_
#define INFER_TESTS_TESTING_TEST_DEVICE_H_

#include <memory>
#include <string>

#include "runtime/caching_allocator.h"
#include "runtime/device.h"
#include "runtime/device_context.h"
#include "runtime/staging_pool.h"

namespace infer::testing {

struct TestDevice {
  std::unique_ptr<Device> device;
  std::unique_ptr<CachingAllocator> allocator;
  std::unique_ptr<HostStagingPool> staging;
  std::unique_ptr<Stream> stream;  // for RunBatch

  DeviceContext context() const { return {device.get(), allocator.get(), staging.get()}; }

  // `spec` as for CreateDevice; a zero budget means 90% of the device.
  static absl::StatusOr<std::unique_ptr<TestDevice>> Create(const std::string& spec,
                                                            int64_t budget_bytes = 0) {
    auto t = std::make_unique<TestDevice>();
    absl::StatusOr<std::unique_ptr<Device>> device = CreateDevice(spec);
    if (!device.ok()) return device.status();
    t->device = *std::move(device);
    CachingAllocatorOptions o;
    o.budget_bytes = budget_bytes;
    absl::StatusOr<std::unique_ptr<CachingAllocator>> a =
        CachingAllocator::Create(t->device.get(), o);
    if (!a.ok()) return a.status();
    t->allocator = *std::move(a);
    absl::StatusOr<std::unique_ptr<HostStagingPool>> staging =
        HostStagingPool::Create(t->device.get(), StagingPoolOptions{});
    if (!staging.ok()) return staging.status();
    t->staging = *std::move(staging);
    absl::StatusOr<std::unique_ptr<Stream>> stream = t->device->CreateStream();
    if (!stream.ok()) return stream.status();
    t->stream = *std::move(stream);
    return t;
  }
};

}  // namespace infer::testing

#endif  // INFER_TESTS_TESTING_TEST_DEVICE_H_
