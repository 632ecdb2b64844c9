#include "runtime/compute_stream.h"

#include <utility>

#include "runtime/status_macros.h"

namespace infer {

absl::StatusOr<ComputeStream> ComputeStream::Create(Device* device, CachingAllocator* allocator) {
  if (device == nullptr) return absl::InvalidArgumentError("device is null");
  if (allocator != nullptr && allocator->device() != device) {
    return absl::InvalidArgumentError("the allocator belongs to another device");
  }
  ComputeStream s;
  INFER_ASSIGN_OR_RETURN(s.stream_, device->CreateStream(StreamKind::kCompute));
  if (const size_t bytes = device->GemmWorkspaceBytes(); allocator != nullptr && bytes > 0) {
    INFER_ASSIGN_OR_RETURN(s.workspace_, DeviceBuffer::Allocate(allocator, bytes, s.get()));
    INFER_RETURN_IF_ERROR(device->SetGemmWorkspace(s.get(), s.workspace_.get(), bytes));
  }
  return s;
}

int64_t ComputeStream::workspace_bytes() const {
  return workspace_.get() == nullptr
             ? 0
             : CachingAllocator::BlockBytes(static_cast<int64_t>(workspace_.size()));
}

}  // namespace infer
