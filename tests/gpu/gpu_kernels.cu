#include "tests/gpu/gpu_kernels.cuh"

namespace infer::testing {
namespace {

__device__ long long NowNs() {
  long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void WaitForMarker(const volatile int* marker, int expected, long long timeout_ns,
                              int* seen) {
  const long long start = NowNs();
  int found = 0;
  while (NowNs() - start < timeout_ns) {
    if (*marker == expected) {
      found = 1;
      break;
    }
  }
  *seen = found;
}

__global__ void SpinThenWrite(long long ns, int value, int* out) {
  const long long start = NowNs();
  while (NowNs() - start < ns) {
  }
  *out = value;
}

__global__ void IllegalWrite(int* bad) { *bad = 1; }

}  // namespace

cudaError_t LaunchIllegalWrite(cudaStream_t stream) {
  IllegalWrite<<<1, 1, 0, stream>>>(reinterpret_cast<int*>(16));
  return cudaGetLastError();
}

cudaError_t LaunchWaitForMarker(cudaStream_t stream, const int* marker, int expected,
                                int timeout_ms, int* seen) {
  WaitForMarker<<<1, 1, 0, stream>>>(marker, expected, timeout_ms * 1000000LL, seen);
  return cudaGetLastError();
}

cudaError_t LaunchSpinThenWrite(cudaStream_t stream, int ms, int value, int* out) {
  SpinThenWrite<<<1, 1, 0, stream>>>(ms * 1000000LL, value, out);
  return cudaGetLastError();
}

}  // namespace infer::testing
