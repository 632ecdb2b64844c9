// Helpers for tests that call CUDA kernels directly: device arrays owned by
// the test, an assertion on CUDA runtime results, and the skip (with the
// reason) where no GPU is usable. Only for test targets built with CUDA.
#ifndef INFER_TESTS_TESTING_CUDA_ARRAYS_H_
#define INFER_TESTS_TESTING_CUDA_ARRAYS_H_

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "runtime/device.h"

// ASSERTs that a CUDA runtime call returned cudaSuccess, naming the call
// and the error.
#define INFER_ASSERT_CUDA(expr)                                    \
  do {                                                             \
    const cudaError_t infer_cuda_error_ = (expr);                  \
    ASSERT_EQ(infer_cuda_error_, cudaSuccess)                      \
        << #expr << ": " << cudaGetErrorString(infer_cuda_error_); \
  } while (0)

// Skips the current test, saying why, when no GPU is usable.
#define INFER_SKIP_WITHOUT_GPU()                                             \
  do {                                                                       \
    const ::infer::CudaAvailability cuda_ = ::infer::ProbeCuda();            \
    if (cuda_.device_count == 0) GTEST_SKIP() << "no GPU: " << cuda_.reason; \
  } while (0)

namespace infer::testing {

// Device memory owned by a test, freed on destruction. Not copyable.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) {
    status_ = cudaMalloc(reinterpret_cast<void**>(&ptr_), std::max<size_t>(n, 1) * sizeof(T));
    if (status_ != cudaSuccess) ptr_ = nullptr;
  }
  ~DeviceArray() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  cudaError_t status() const { return status_; }
  T* get() const { return ptr_; }
  size_t size() const { return n_; }
  // Copies min(host.size(), size()) elements in.
  cudaError_t Upload(const std::vector<T>& host) {
    if (status_ != cudaSuccess) return status_;
    return cudaMemcpy(ptr_, host.data(), std::min(host.size(), n_) * sizeof(T),
                      cudaMemcpyHostToDevice);
  }
  cudaError_t Download(std::vector<T>* host) const {
    host->resize(n_);
    return cudaMemcpy(host->data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
  }

 private:
  size_t n_;
  T* ptr_ = nullptr;
  cudaError_t status_ = cudaSuccess;
};

}  // namespace infer::testing

#endif  // INFER_TESTS_TESTING_CUDA_ARRAYS_H_
