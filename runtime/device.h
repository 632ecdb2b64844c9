// Device abstraction: the one interface between the layers above (models,
// executor, batcher) and a compute device. Two implementations: the CPU
// device (host memory, oneDNN's sgemm, an OpenMP compute pool) and the CUDA
// device (cudaMalloc, streams,
// events, cuBLAS). Which one runs is chosen at start by a spec string
// ("cpu", "cuda:0"); nothing above this header branches on the build.
//
// Ordering model (as in CUDA): work enqueued on one Stream runs in order;
// Events order work across streams without device-wide synchronisation. On
// the CPU device every enqueued operation has completed when the call
// returns, which satisfies the same contract.
//
// Thread-safety: Device methods are thread-safe, and so is enqueueing on
// one Stream from several threads (the order between two threads' calls is
// then whichever came first). What must not be shared between threads at
// once is a stream's GEMM handle state, i.e. Sgemm and model kernels on a
// compute stream: a compute stream is driven by one thread at a time.
//
// Errors: a device call fails with the Status of its error. An error after
// which the device can run nothing more (an illegal address, a kernel
// failure, an uncorrectable ECC error: CUDA's "sticky" errors) is returned
// as DeviceLostError, so the layers above can tell it from a failed request
// with IsDeviceLost: the process must be restarted to use the device again.
#ifndef INFER_RUNTIME_DEVICE_H_
#define INFER_RUNTIME_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infer {

enum class DeviceKind { kCpu, kCuda };

struct DeviceInfo {
  DeviceKind kind = DeviceKind::kCpu;
  int ordinal = 0;                 // CUDA device index; 0 for the CPU
  std::string name;                // e.g. "NVIDIA H100 80GB HBM3" or "cpu"
  std::string uuid;                // "GPU-..." for CUDA; empty for the CPU
  int64_t total_memory_bytes = 0;  // device memory (host RAM for the CPU)
  // CUDA: major * 10 + minor (90 for an H100's sm_90); 0 for the CPU.
  int compute_capability = 0;
  // CPU: the threads compute kernels run on (the OpenMP team oneDNN and the
  // CPU encoder's own kernels share). 0 for a GPU.
  int compute_threads = 0;
};

struct DeviceOptions {
  // CPU: compute threads; 0 means DefaultCpuThreads() (runtime/cpu_device.h:
  // OMP_NUM_THREADS, else one per core this process may use, after its CPU
  // affinity and a cgroup CPU quota). Ignored by GPUs.
  int cpu_threads = 0;
};

// What a stream is for. Only compute streams carry GEMM state (a cuBLAS
// handle on CUDA); copy streams only move bytes.
enum class StreamKind { kCompute, kCopy };

// Opaque handles; each Device implementation defines its own subclasses.
class Stream {
 public:
  Stream();
  virtual ~Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  // Unique for the life of the process, never reused: unlike the address, a
  // new stream never shares the id of a destroyed one.
  uint64_t id() const { return id_; }

 private:
  const uint64_t id_;
};
class Event {
 public:
  virtual ~Event() = default;
};

// Row-major single-precision GEMM: C[m,n] = alpha * op(A) * op(B) + beta * C,
// where op(A) is [m,k] and op(B) is [k,n]; lda/ldb/ldc are row strides of the
// matrices as stored.
struct GemmArgs {
  bool transpose_a = false;
  bool transpose_b = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;
  int64_t ldb = 0;
  float beta = 0.0f;
  float* c = nullptr;
  int64_t ldc = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  virtual const DeviceInfo& info() const = 0;
  // "cpu" or "cuda:N".
  std::string spec() const;

  // Raw device memory, at least 256-byte aligned; RESOURCE_EXHAUSTED on
  // failure. Only the CachingAllocator (runtime/caching_allocator.h) should
  // call these: everything else allocates through it, under its budget.
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  virtual void Free(void* ptr) = 0;

  // Host memory the device copies from and to asynchronously: page-locked
  // (cudaHostAlloc) on CUDA, aligned heap memory on the CPU. Used through the
  // HostStagingPool (runtime/staging_pool.h).
  virtual absl::StatusOr<void*> AllocateHost(size_t bytes) = 0;
  virtual void FreeHost(void* ptr) = 0;

  virtual absl::StatusOr<std::unique_ptr<Stream>> CreateStream(
      StreamKind kind = StreamKind::kCompute) = 0;
  // Events for ordering and waiting. On CUDA a wait (SynchronizeEvent) puts
  // the thread to sleep until the event completes rather than spinning.
  // Events are reusable: record the same one again for the next batch.
  virtual absl::StatusOr<std::unique_ptr<Event>> CreateEvent() = 0;

  // GEMM workspace: the scratch bytes a compute stream's GEMM library wants
  // (cuBLAS's recommended size on CUDA; 0 on the CPU). SetGemmWorkspace hands
  // a compute stream `bytes` at `ptr` for good; the caller keeps the memory
  // alive, and unused by anything else, until the stream is destroyed (see
  // ComputeStream in runtime/compute_stream.h). FAILED_PRECONDITION on a
  // copy stream.
  virtual size_t GemmWorkspaceBytes() const { return 0; }
  virtual absl::Status SetGemmWorkspace(Stream* /*stream*/, void* /*ptr*/, size_t /*bytes*/) {
    return absl::OkStatus();
  }

  // Asynchronous copies enqueued on `stream`. The host buffer must stay valid
  // (and unmodified, for CopyToDevice) until the stream has passed the copy.
  virtual absl::Status CopyToDevice(void* dst, const void* host, size_t bytes, Stream* stream) = 0;
  virtual absl::Status CopyToHost(void* host, const void* src, size_t bytes, Stream* stream) = 0;

  // Marks the point `stream` has reached; `waiter` will not run later work
  // until that point has completed.
  virtual absl::Status RecordEvent(Event* event, Stream* stream) = 0;
  virtual absl::Status StreamWaitEvent(Stream* waiter, Event* event) = 0;
  // Blocks the calling thread until the event / all work on the stream is done.
  virtual absl::Status SynchronizeEvent(Event* event) = 0;
  virtual absl::Status SynchronizeStream(Stream* stream) = 0;
  // True when the work before the event's last record has completed (an
  // event never recorded counts as complete). Does not block.
  virtual absl::StatusOr<bool> QueryEvent(Event* event) = 0;

  // True when every enqueued operation has completed by the time its call
  // returns (the CPU device): events and stream waits then order nothing,
  // and callers may skip them.
  virtual bool synchronous() const { return false; }

  // Enqueues a GEMM on compute `stream` (oneDNN's sgemm on the CPU, cuBLAS on
  // CUDA).
  virtual absl::Status Sgemm(Stream* stream, const GemmArgs& args) = 0;

 protected:
  Device() = default;
};

// The error for a device that can run nothing more (see Errors above):
// INTERNAL, with a payload IsDeviceLost recognises, and `message`.
absl::Status DeviceLostError(absl::string_view message);
bool IsDeviceLost(const absl::Status& status);

// Whether a usable CUDA device exists, and why not when none does.
struct CudaAvailability {
  int device_count = 0;
  std::string reason;  // empty when device_count > 0
};
CudaAvailability ProbeCuda();

// Creates the device named by `spec`: "cpu" or "cuda:N". INVALID_ARGUMENT for
// a malformed spec or a negative thread count; FAILED_PRECONDITION when CUDA
// is not built in or the GPU is not present.
absl::StatusOr<std::unique_ptr<Device>> CreateDevice(absl::string_view spec,
                                                     const DeviceOptions& options = {});

// "cuda:0" when a GPU is usable, else "cpu".
std::string DefaultDeviceSpec();

}  // namespace infer

#endif  // INFER_RUNTIME_DEVICE_H_
