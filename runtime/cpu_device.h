// The CPU device: host memory, OpenBLAS GEMMs, synchronous "streams".
// Thread-safe.
#ifndef INFER_RUNTIME_CPU_DEVICE_H_
#define INFER_RUNTIME_CPU_DEVICE_H_

#include <memory>

#include "runtime/device.h"

namespace infer {

std::unique_ptr<Device> CreateCpuDevice();

}  // namespace infer

#endif  // INFER_RUNTIME_CPU_DEVICE_H_
