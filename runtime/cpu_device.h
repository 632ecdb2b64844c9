// The CPU device: host memory, oneDNN's sgemm, synchronous "streams", and the
// size of the compute pool (OpenMP threads) its kernels run on.
// Thread-safe.
#ifndef INFER_RUNTIME_CPU_DEVICE_H_
#define INFER_RUNTIME_CPU_DEVICE_H_

#include <memory>

#include "runtime/device.h"

namespace infer {

// `threads`: the compute threads (DeviceInfo::compute_threads); 0 means
// DefaultCpuThreads().
std::unique_ptr<Device> CreateCpuDevice(int threads);

// OMP_NUM_THREADS when it is set to a positive number; else one per core this
// process may run on: the CPUs of its affinity mask, capped by its cgroup's
// CPU quota (cgroup v2 cpu.max or v1 cfs_quota_us, rounded up) when one is
// set, as containers under Kubernetes have. At least 1.
int DefaultCpuThreads();

// Sets the calling thread's OpenMP team size for the parallel regions it
// starts next (oneDNN's and the CPU kernels'). Cheap; call before CPU work on
// a thread that may not have set it.
void UseCpuThreads(int threads);

}  // namespace infer

#endif  // INFER_RUNTIME_CPU_DEVICE_H_
