#include "runtime/cpu_device.h"

#include <cblas.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace infer {
namespace {

constexpr size_t kAlignment = 256;

class CpuStream final : public Stream {};
class CpuEvent final : public Event {};

class CpuDevice final : public Device {
 public:
  CpuDevice() {
    info_.kind = DeviceKind::kCpu;
    info_.name = "cpu";
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page_size = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page_size > 0) {
      info_.total_memory_bytes = static_cast<int64_t>(pages) * page_size;
    }
  }

  const DeviceInfo& info() const override { return info_; }

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* ptr = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
    if (ptr == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat("cpu: cannot allocate ", bytes, " bytes"));
    }
    return ptr;
  }
  void Free(void* ptr) override { std::free(ptr); }

  absl::StatusOr<void*> AllocateHost(size_t bytes) override { return Allocate(bytes); }
  void FreeHost(void* ptr) override { std::free(ptr); }

  absl::StatusOr<std::unique_ptr<Stream>> CreateStream() override {
    return std::make_unique<CpuStream>();
  }
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent() override {
    return std::make_unique<CpuEvent>();
  }

  absl::Status CopyToDevice(void* dst, const void* host, size_t bytes, Stream*) override {
    if (bytes > 0) std::memcpy(dst, host, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* host, const void* src, size_t bytes, Stream*) override {
    if (bytes > 0) std::memcpy(host, src, bytes);
    return absl::OkStatus();
  }

  // Every CPU operation completes before its call returns, so events and
  // stream waits have nothing left to order.
  absl::Status RecordEvent(Event*, Stream*) override { return absl::OkStatus(); }
  absl::Status StreamWaitEvent(Stream*, Event*) override { return absl::OkStatus(); }
  absl::Status SynchronizeEvent(Event*) override { return absl::OkStatus(); }
  absl::Status SynchronizeStream(Stream*) override { return absl::OkStatus(); }
  absl::StatusOr<bool> QueryEvent(Event*) override { return true; }
  bool synchronous() const override { return true; }

  absl::Status Sgemm(Stream*, const GemmArgs& g) override {
    if (g.m == 0 || g.n == 0) return absl::OkStatus();
    cblas_sgemm(CblasRowMajor, g.transpose_a ? CblasTrans : CblasNoTrans,
                g.transpose_b ? CblasTrans : CblasNoTrans, static_cast<int>(g.m),
                static_cast<int>(g.n), static_cast<int>(g.k), g.alpha, g.a, static_cast<int>(g.lda),
                g.b, static_cast<int>(g.ldb), g.beta, g.c, static_cast<int>(g.ldc));
    return absl::OkStatus();
  }

 private:
  DeviceInfo info_;
};

}  // namespace

std::unique_ptr<Device> CreateCpuDevice() { return std::make_unique<CpuDevice>(); }

}  // namespace infer
