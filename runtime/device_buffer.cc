#include <utility>

#include "runtime/caching_allocator.h"

namespace infer {

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(DeviceAllocator* allocator, size_t bytes,
                                                    Stream* stream) {
  absl::StatusOr<void*> ptr = allocator->Allocate(bytes, stream);
  if (!ptr.ok()) return ptr.status();
  DeviceBuffer buffer;
  buffer.allocator_ = allocator;
  buffer.ptr_ = *ptr;
  buffer.bytes_ = bytes;
  return buffer;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    allocator_ = std::exchange(other.allocator_, nullptr);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::Reset() {
  if (ptr_ != nullptr) allocator_->Free(ptr_).IgnoreError();  // ours: cannot be foreign
  allocator_ = nullptr;
  ptr_ = nullptr;
  bytes_ = 0;
}

}  // namespace infer
