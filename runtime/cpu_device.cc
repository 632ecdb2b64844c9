#include "runtime/cpu_device.h"

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace infer {
namespace {

constexpr size_t kAlignment = 256;

class CpuStream final : public Stream {};
class CpuEvent final : public Event {};

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(int threads) {
    info_.kind = DeviceKind::kCpu;
    info_.name = "cpu";
    info_.compute_threads = threads;
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

  absl::StatusOr<std::unique_ptr<Stream>> CreateStream(StreamKind) override {
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
    UseCpuThreads(info_.compute_threads);
    // dnnl_sgemm is row-major, like GemmArgs.
    const dnnl_status_t st =
        dnnl_sgemm(g.transpose_a ? 'T' : 'N', g.transpose_b ? 'T' : 'N', g.m, g.n, g.k, g.alpha,
                   g.a, g.lda, g.b, g.ldb, g.beta, g.c, g.ldc);
    if (st != dnnl_success) {
      return absl::InternalError(absl::StrCat("dnnl_sgemm failed with status ", st));
    }
    return absl::OkStatus();
  }

 private:
  DeviceInfo info_;
};

// The cgroup's CPU quota in cores, rounded up; 0 when none is set or it
// cannot be read.
int CgroupCpuLimit() {
  // cgroup v2: "max 100000" (none) or "<quota> <period>".
  if (std::ifstream f("/sys/fs/cgroup/cpu.max"); f) {
    std::string quota, period;
    f >> quota >> period;
    double q = 0, p = 0;
    if (quota != "max" && absl::SimpleAtod(quota, &q) && absl::SimpleAtod(period, &p) && q > 0 &&
        p > 0) {
      return static_cast<int>(std::ceil(q / p));
    }
    return 0;
  }
  // cgroup v1: quota -1 means none.
  std::ifstream q("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), p("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
  long long quota = -1, period = 0;
  if (q >> quota && p >> period && quota > 0 && period > 0) {
    return static_cast<int>((quota + period - 1) / period);
  }
  return 0;
}

}  // namespace

std::unique_ptr<Device> CreateCpuDevice(int threads) {
  return std::make_unique<CpuDevice>(threads > 0 ? threads : DefaultCpuThreads());
}

int DefaultCpuThreads() {
#if defined(__SANITIZE_THREAD__)
  // libgomp is not built with ThreadSanitizer, which cannot see its barriers
  // and would report every hand-off inside a parallel region: compute on one
  // thread, which OpenMP runs inline on the caller.
  return 1;
#endif
  // OpenMP's own setting, when the operator gave one.
  if (const char* env = std::getenv("OMP_NUM_THREADS"); env != nullptr) {
    int n = 0;
    if (absl::SimpleAtoi(env, &n) && n > 0) return n;
  }
  int cpus = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cpus = CPU_COUNT(&set);
  if (cpus <= 0) cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  if (const int limit = CgroupCpuLimit(); limit > 0 && limit < cpus) cpus = limit;
  return cpus > 0 ? cpus : 1;
}

void UseCpuThreads(int threads) {
  if (threads > 0 && omp_get_max_threads() != threads) omp_set_num_threads(threads);
}

}  // namespace infer
