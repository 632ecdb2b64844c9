#include "runtime/cuda_device.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/status_macros.h"

namespace infer {
namespace {

std::string UuidString(const cudaUUID_t& uuid) {
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  return absl::StrFormat("GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                         b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                         b[12], b[13], b[14], b[15]);
}

// A compute stream owns a cuBLAS handle; a copy stream has none.
class CudaStream final : public Stream {
 public:
  CudaStream(cudaStream_t stream, cublasHandle_t cublas) : stream_(stream), cublas_(cublas) {}
  ~CudaStream() override {
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    cudaStreamDestroy(stream_);
  }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  const GemmWorkspace& workspace() const { return workspace_; }
  void set_workspace(void* ptr, size_t bytes) { workspace_ = {ptr, bytes}; }

 private:
  cudaStream_t stream_;
  cublasHandle_t cublas_;    // null on a copy stream
  GemmWorkspace workspace_;  // what SetGemmWorkspace gave cuBLAS
};

class CudaEvent final : public Event {
 public:
  explicit CudaEvent(cudaEvent_t event) : event_(event) {}
  ~CudaEvent() override { cudaEventDestroy(event_); }
  cudaEvent_t event() const { return event_; }

 private:
  cudaEvent_t event_;
};

cudaStream_t Native(Stream* s) { return static_cast<CudaStream*>(s)->stream(); }
cudaEvent_t Native(Event* e) { return static_cast<CudaEvent*>(e)->event(); }

class CudaDevice final : public Device {
 public:
  CudaDevice(DeviceInfo info, size_t workspace_bytes)
      : info_(std::move(info)), workspace_bytes_(workspace_bytes) {}

  const DeviceInfo& info() const override { return info_; }

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    if (absl::Status s = SetDevice(); !s.ok()) return s;
    void* ptr = nullptr;
    const cudaError_t err = cudaMalloc(&ptr, bytes == 0 ? 1 : bytes);
    if (err != cudaSuccess && err != cudaErrorMemoryAllocation)
      return CudaStatus(err, "cudaMalloc");
    if (err != cudaSuccess) {
      cudaGetLastError();  // clear the sticky-free error state
      return absl::ResourceExhaustedError(absl::StrCat(spec(), ": cudaMalloc of ", bytes,
                                                       " bytes failed: ", cudaGetErrorString(err)));
    }
    return ptr;
  }
  void Free(void* ptr) override {
    if (ptr == nullptr) return;
    cudaSetDevice(info_.ordinal);
    cudaFree(ptr);
  }

  absl::StatusOr<void*> AllocateHost(size_t bytes) override {
    if (absl::Status s = SetDevice(); !s.ok()) return s;
    void* ptr = nullptr;
    const cudaError_t err = cudaHostAlloc(&ptr, bytes == 0 ? 1 : bytes, cudaHostAllocPortable);
    if (err != cudaSuccess && err != cudaErrorMemoryAllocation) {
      return CudaStatus(err, "cudaHostAlloc");
    }
    if (err != cudaSuccess) {
      cudaGetLastError();
      return absl::ResourceExhaustedError(absl::StrCat(spec(), ": cudaHostAlloc of ", bytes,
                                                       " bytes failed: ", cudaGetErrorString(err)));
    }
    return ptr;
  }
  void FreeHost(void* ptr) override {
    if (ptr != nullptr) cudaFreeHost(ptr);
  }

  absl::StatusOr<std::unique_ptr<Stream>> CreateStream(StreamKind kind) override {
    if (absl::Status s = SetDevice(); !s.ok()) return s;
    cudaStream_t stream = nullptr;
    INFER_RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                               "cudaStreamCreate");
    cublasHandle_t handle = nullptr;
    if (kind == StreamKind::kCompute) {
      absl::Status st = CublasStatus(cublasCreate(&handle), "cublasCreate");
      if (st.ok()) st = CublasStatus(cublasSetStream(handle, stream), "cublasSetStream");
      if (!st.ok()) {
        if (handle != nullptr) cublasDestroy(handle);
        cudaStreamDestroy(stream);
        return st;
      }
    }
    return std::make_unique<CudaStream>(stream, handle);
  }

  // Blocking sync: a thread waiting in cudaEventSynchronize sleeps instead
  // of spinning a core for the whole of the batch's GPU time.
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent() override {
    if (absl::Status s = SetDevice(); !s.ok()) return s;
    cudaEvent_t event = nullptr;
    INFER_RETURN_IF_CUDA_ERROR(
        cudaEventCreateWithFlags(&event, cudaEventDisableTiming | cudaEventBlockingSync),
        "cudaEventCreate");
    return std::make_unique<CudaEvent>(event);
  }

  size_t GemmWorkspaceBytes() const override { return workspace_bytes_; }

  absl::Status SetGemmWorkspace(Stream* stream, void* ptr, size_t bytes) override {
    auto* cuda_stream = static_cast<CudaStream*>(stream);
    cublasHandle_t handle = cuda_stream->cublas();
    if (handle == nullptr) {
      return absl::FailedPreconditionError("a copy stream has no GEMM handle for a workspace");
    }
    INFER_RETURN_IF_ERROR(
        CublasStatus(cublasSetWorkspace(handle, ptr, bytes), "cublasSetWorkspace"));
    cuda_stream->set_workspace(ptr, bytes);
    return absl::OkStatus();
  }

  absl::Status CopyToDevice(void* dst, const void* host, size_t bytes, Stream* stream) override {
    if (absl::Status s = SetDevice(); !s.ok()) return s;
    INFER_RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, Native(stream)),
        "cudaMemcpyAsync H2D");
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* host, const void* src, size_t bytes, Stream* stream) override {
    if (absl::Status s = SetDevice(); !s.ok()) return s;
    INFER_RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, Native(stream)),
        "cudaMemcpyAsync D2H");
    return absl::OkStatus();
  }

  absl::Status RecordEvent(Event* event, Stream* stream) override {
    if (absl::Status s = SetDevice(); !s.ok()) return s;
    INFER_RETURN_IF_CUDA_ERROR(cudaEventRecord(Native(event), Native(stream)), "cudaEventRecord");
    return absl::OkStatus();
  }
  absl::Status StreamWaitEvent(Stream* waiter, Event* event) override {
    if (absl::Status s = SetDevice(); !s.ok()) return s;
    INFER_RETURN_IF_CUDA_ERROR(cudaStreamWaitEvent(Native(waiter), Native(event), 0),
                               "cudaStreamWaitEvent");
    return absl::OkStatus();
  }
  absl::Status SynchronizeEvent(Event* event) override {
    INFER_RETURN_IF_CUDA_ERROR(cudaEventSynchronize(Native(event)), "cudaEventSynchronize");
    return absl::OkStatus();
  }
  absl::Status SynchronizeStream(Stream* stream) override {
    INFER_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(Native(stream)), "cudaStreamSynchronize");
    return absl::OkStatus();
  }

  absl::StatusOr<bool> QueryEvent(Event* event) override {
    const cudaError_t err = cudaEventQuery(Native(event));
    if (err == cudaSuccess) return true;
    if (err == cudaErrorNotReady) {
      cudaGetLastError();  // not-ready is not an error; clear it
      return false;
    }
    return CudaStatus(err, "cudaEventQuery");
  }

  absl::Status Sgemm(Stream* stream, const GemmArgs& g) override {
    if (g.m == 0 || g.n == 0) return absl::OkStatus();
    if (absl::Status s = SetDevice(); !s.ok()) return s;
    // cuBLAS is column-major: the row-major C = op(A) op(B) is the
    // column-major C^T = op(B)^T op(A)^T, i.e. swap the operands.
    cublasHandle_t handle = static_cast<CudaStream*>(stream)->cublas();
    if (handle == nullptr) return absl::FailedPreconditionError("Sgemm on a copy stream");
    return CublasStatus(
        cublasSgemm(handle, g.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                    g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(g.n),
                    static_cast<int>(g.m), static_cast<int>(g.k), &g.alpha, g.b,
                    static_cast<int>(g.ldb), g.a, static_cast<int>(g.lda), &g.beta, g.c,
                    static_cast<int>(g.ldc)),
        "cublasSgemm");
  }

 private:
  absl::Status SetDevice() { return CudaStatus(cudaSetDevice(info_.ordinal), "cudaSetDevice"); }

  const DeviceInfo info_;
  const size_t workspace_bytes_;
};

}  // namespace

bool IsStickyCudaError(cudaError_t err) {
  switch (err) {
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorContextIsDestroyed:
      return true;
    default:
      return false;
  }
}

absl::Status CudaStatus(cudaError_t err, absl::string_view what) {
  if (err == cudaSuccess) return absl::OkStatus();
  const std::string message =
      absl::StrCat(what, ": ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
  if (IsStickyCudaError(err)) {
    return DeviceLostError(absl::StrCat(message, "; the GPU can run nothing more in this process"));
  }
  return absl::InternalError(message);
}

CudaAvailability ProbeCudaDevices() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  switch (err) {
    case cudaSuccess:
      if (count > 0) return {count, ""};
      return {0, "no CUDA device is present"};
    case cudaErrorInsufficientDriver:
      return {0, "no NVIDIA driver is loaded (cudaErrorInsufficientDriver)"};
    case cudaErrorStubLibrary:
      return {0, "only the CUDA stub driver library is present (cudaErrorStubLibrary)"};
    case cudaErrorNoDevice:
      return {0, "the NVIDIA driver reports no device (cudaErrorNoDevice)"};
    default:
      return {0, absl::StrCat("cudaGetDeviceCount failed: ", cudaGetErrorName(err))};
  }
}

absl::StatusOr<std::unique_ptr<Device>> CreateCudaDevice(int ordinal) {
  const CudaAvailability avail = ProbeCudaDevices();
  if (ordinal >= avail.device_count) {
    return absl::FailedPreconditionError(
        absl::StrCat("device 'cuda:", ordinal, "' requested but ",
                     avail.device_count == 0
                         ? avail.reason
                         : absl::StrCat("only ", avail.device_count, " CUDA device(s) exist")));
  }
  cudaDeviceProp prop;
  INFER_RETURN_IF_CUDA_ERROR(cudaGetDeviceProperties(&prop, ordinal), "cudaGetDeviceProperties");
  DeviceInfo info;
  info.kind = DeviceKind::kCuda;
  info.ordinal = ordinal;
  info.name = prop.name;
  info.uuid = UuidString(prop.uuid);
  info.total_memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  info.compute_capability = prop.major * 10 + prop.minor;
  // cuBLAS's recommended workspace: 32 MiB on Hopper and later, 4 MiB before.
  const size_t workspace = static_cast<size_t>(prop.major >= 9 ? 32 : 4) << 20;
  return std::unique_ptr<Device>(new CudaDevice(std::move(info), workspace));
}

cudaStream_t NativeCudaStream(Stream* stream) { return Native(stream); }

cublasHandle_t NativeCublasHandle(Stream* stream) {
  return static_cast<CudaStream*>(stream)->cublas();
}

GemmWorkspace NativeGemmWorkspace(Stream* stream) {
  return static_cast<CudaStream*>(stream)->workspace();
}

absl::Status CublasStatus(cublasStatus_t st, absl::string_view what) {
  if (st == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": cuBLAS error ", static_cast<int>(st), " (",
                                          cublasGetStatusString(st), ")"));
}

}  // namespace infer
