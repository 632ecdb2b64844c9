// The CUDA device: cudaMalloc'd memory, CUDA streams and events, cuBLAS GEMMs.
// Compiled only when the build has CUDA (INFER_WITH_CUDA). Thread-safe.
#ifndef INFER_RUNTIME_CUDA_DEVICE_H_
#define INFER_RUNTIME_CUDA_DEVICE_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/device.h"

namespace infer {

// Counts usable GPUs. "No driver" (35), "stub library" (34) and "no device"
// (100) all mean no GPU; the reason says which.
CudaAvailability ProbeCudaDevices();

absl::StatusOr<std::unique_ptr<Device>> CreateCudaDevice(int ordinal);

// The native stream behind a Stream created by a CUDA device, for kernels.
cudaStream_t NativeCudaStream(Stream* stream);

// The cuBLAS handle bound to a compute Stream created by a CUDA device (null
// for a copy stream). Used by one thread at a time, like its stream.
cublasHandle_t NativeCublasHandle(Stream* stream);

// The workspace a compute Stream's GEMM handle was given
// (Device::SetGemmWorkspace; runtime/compute_stream.h), for cuBLASLt calls,
// which take it per call; {nullptr, 0} when it was given none.
struct GemmWorkspace {
  void* ptr = nullptr;
  size_t bytes = 0;
};
GemmWorkspace NativeGemmWorkspace(Stream* stream);

// Converts a cuBLAS status into a Status naming `what`; OK for success.
absl::Status CublasStatus(cublasStatus_t st, absl::string_view what);

// True for the errors after which the CUDA context can run nothing more
// (illegal address, kernel failure, uncorrectable ECC, ...): every later
// call in the process fails too.
bool IsStickyCudaError(cudaError_t err);

// Converts a CUDA runtime error into a Status naming `what`; OK for success.
// A sticky error becomes DeviceLostError (runtime/device.h), anything else
// INTERNAL. Every CUDA call of the runtime and the models goes through this
// (or INFER_RETURN_IF_CUDA_ERROR), so a lost device is recognised wherever
// its first error surfaces.
absl::Status CudaStatus(cudaError_t err, absl::string_view what);

}  // namespace infer

#define INFER_RETURN_IF_CUDA_ERROR(expr, what)                             \
  do {                                                                     \
    ::absl::Status infer_cuda_status_ = ::infer::CudaStatus((expr), what); \
    if (!infer_cuda_status_.ok()) return infer_cuda_status_;               \
  } while (0)

#endif  // INFER_RUNTIME_CUDA_DEVICE_H_
