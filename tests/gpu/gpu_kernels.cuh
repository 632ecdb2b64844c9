// Small CUDA kernels for the GPU tests (plain CUDA types only).
#ifndef INFER_TESTS_GPU_GPU_KERNELS_CUH_
#define INFER_TESTS_GPU_GPU_KERNELS_CUH_

#include <cuda_runtime_api.h>

namespace infer::testing {

// One thread polls *marker until it equals `expected` or about `timeout_ms`
// pass; writes 1 to *seen if it did, else 0.
cudaError_t LaunchWaitForMarker(cudaStream_t stream, const int* marker, int expected,
                                int timeout_ms, int* seen);

// One thread spins for about `ms` milliseconds, then writes `value` to *out.
cudaError_t LaunchSpinThenWrite(cudaStream_t stream, int ms, int value, int* out);

// One thread writes through a bad pointer: cudaErrorIllegalAddress, a sticky
// error that leaves the context unusable (run it in a process of its own).
cudaError_t LaunchIllegalWrite(cudaStream_t stream);

}  // namespace infer::testing

#endif  // INFER_TESTS_GPU_GPU_KERNELS_CUH_
