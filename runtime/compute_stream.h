// ComputeStream: a compute stream with its GEMM workspace, the one way the
// runtime creates the streams that batches compute on.
//
// cuBLAS wants a workspace per handle (32 MiB on Hopper). Left to itself it
// would cudaMalloc one behind the allocator's back; handed a block per batch
// and detached after, the handle is left with none for the next caller. Here
// each compute stream gets one permanent workspace from the caching
// allocator when it is created, so it is inside the budget and counted once
// (workspace_bytes(); the engine keeps it out of the memory batches may
// use), and models never set or detach a workspace themselves.
//
// The workspace is freed before the stream is destroyed (the free is
// ordered after everything enqueued on the stream). Movable, not copyable;
// the allocator must outlive it.
#ifndef INFER_RUNTIME_COMPUTE_STREAM_H_
#define INFER_RUNTIME_COMPUTE_STREAM_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "runtime/caching_allocator.h"
#include "runtime/device.h"

namespace infer {

class ComputeStream {
 public:
  ComputeStream() = default;
  // A compute stream of `device`, with a GEMM workspace of the device's
  // GemmWorkspaceBytes() from `allocator` (none on the CPU). A null
  // allocator sets no workspace: the GEMM library's default applies (tests
  // and tools that run without one). INVALID_ARGUMENT when the allocator
  // belongs to another device; RESOURCE_EXHAUSTED when the workspace does
  // not fit the budget.
  static absl::StatusOr<ComputeStream> Create(Device* device, CachingAllocator* allocator);

  ~ComputeStream() { workspace_.Reset(); }  // before stream_ goes
  ComputeStream(ComputeStream&&) noexcept = default;
  ComputeStream& operator=(ComputeStream&& other) noexcept {
    workspace_.Reset();
    stream_ = std::move(other.stream_);
    workspace_ = std::move(other.workspace_);
    return *this;
  }

  Stream* get() const { return stream_.get(); }
  // Bytes the workspace occupies in the allocator (its block).
  int64_t workspace_bytes() const;

 private:
  std::unique_ptr<Stream> stream_;  // declared first: destroyed last
  DeviceBuffer workspace_;
};

}  // namespace infer

#endif  // INFER_RUNTIME_COMPUTE_STREAM_H_
