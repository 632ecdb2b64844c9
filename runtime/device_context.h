// DeviceContext: what a model needs from the runtime to run on one device.
// Borrowed pointers: the owner (the Engine) keeps them alive longer than any
// model created with the context.
#ifndef INFER_RUNTIME_DEVICE_CONTEXT_H_
#define INFER_RUNTIME_DEVICE_CONTEXT_H_

#include "runtime/caching_allocator.h"
#include "runtime/device.h"
#include "runtime/staging_pool.h"

namespace infer {

struct DeviceContext {
  Device* device = nullptr;
  // Every device allocation of a model (weights and activations) goes
  // through this allocator, under its budget.
  CachingAllocator* allocator = nullptr;
  // Host buffers for the copies to and from the device.
  HostStagingPool* staging = nullptr;
};

}  // namespace infer

#endif  // INFER_RUNTIME_DEVICE_CONTEXT_H_
