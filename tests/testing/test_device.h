// A device with its caching allocator, for tests that create models without
// an Engine. Not thread-safe to construct; the context it hands out is.
#ifndef INFER_TESTS_TESTING_TEST_DEVICE_H_
#define INFER_TESTS_TESTING_TEST_DEVICE_H_

#include <memory>
#include <string>

#include "runtime/caching_allocator.h"
#include "runtime/device.h"
#include "runtime/device_context.h"

namespace infer::testing {

struct TestDevice {
  std::unique_ptr<Device> device;
  std::unique_ptr<CachingAllocator> allocator;

  DeviceContext context() const { return {device.get(), allocator.get()}; }

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
    return t;
  }
};

}  // namespace infer::testing

#endif  // INFER_TESTS_TESTING_TEST_DEVICE_H_
