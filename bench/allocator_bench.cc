// allocator-bench: cost of one allocate+free through the CachingAllocator vs
// the device's own allocator (aligned_alloc on the CPU, cudaMalloc/cudaFree
// on CUDA), on the same mixed-size workload, side by side in one run.
//
//   build/bin/allocator-bench [--device cpu|cuda:0] [--ops N] [--window W]
//
// Workload: W live allocations; each operation frees a random one and
// allocates a new one, 80% small (64 B - 64 KiB), 20% large (1 - 8 MiB).
#include <cblas.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "runtime/caching_allocator.h"
#include "runtime/device.h"

namespace {

struct Result {
  double ns_per_op = 0;
  int64_t ops = 0;
};

std::vector<size_t> Sizes(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<size_t> sizes(n);
  for (auto& s : sizes) {
    s = rng() % 100 < 80 ? 64 + rng() % (64 << 10) : (1 << 20) + rng() % (7 << 20);
  }
  return sizes;
}

template <typename AllocFn, typename FreeFn>
Result Run(int64_t ops, int window, AllocFn alloc, FreeFn free_fn) {
  const std::vector<size_t> sizes = Sizes(ops + window, 7);
  std::mt19937 rng(11);
  std::vector<void*> live;
  for (int i = 0; i < window; ++i) live.push_back(alloc(sizes[i]));
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < ops; ++i) {
    const size_t slot = rng() % live.size();
    free_fn(live[slot]);
    live[slot] = alloc(sizes[window + i]);
  }
  const auto end = std::chrono::steady_clock::now();
  for (void* p : live) free_fn(p);
  Result r;
  r.ops = ops;
  r.ns_per_op = std::chrono::duration<double, std::nano>(end - start).count() / ops;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string spec = infer::DefaultDeviceSpec();
  int64_t ops = 200000;
  int64_t device_ops = 0;
  int window = 64;
  CLI::App app{"allocator-bench: CachingAllocator vs the device allocator, ns per alloc+free"};
  app.add_option("--device", spec, "cpu or cuda:N")->capture_default_str();
  app.add_option("--ops", ops, "operations through the caching allocator")->capture_default_str();
  app.add_option("--device-ops", device_ops,
                 "operations through the device allocator (default: --ops on the CPU, "
                 "ops/20 on CUDA, where cudaMalloc is slow)");
  app.add_option("--window", window, "live allocations")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  auto device = infer::CreateDevice(spec);
  if (!device.ok()) {
    std::fprintf(stderr, "%s\n", device.status().ToString().c_str());
    return 1;
  }
  infer::Device* d = device->get();
  const bool cuda = d->info().kind == infer::DeviceKind::kCuda;
  if (device_ops == 0) device_ops = cuda ? ops / 20 : ops;
  auto stream = d->CreateStream();
  infer::CachingAllocatorOptions o;
  o.budget_bytes = std::min<int64_t>(d->info().total_memory_bytes / 2, int64_t{4} << 30);
  auto alloc = infer::CachingAllocator::Create(d, o);
  if (!stream.ok() || !alloc.ok()) {
    std::fprintf(stderr, "setup failed\n");
    return 1;
  }
  infer::CachingAllocator* a = alloc->get();
  infer::Stream* s = stream->get();

  const Result raw = Run(
      device_ops, window, [&](size_t n) { return *d->Allocate(n); }, [&](void* p) { d->Free(p); });
  const Result cached = Run(
      ops, window, [&](size_t n) { return *a->Allocate(n, s); },
      [&](void* p) { (void)a->Free(p); });
  const infer::AllocatorStats st = a->stats();

  std::printf(
      "allocator-bench on %s (%s): %d live allocations, 80%% 64 B-64 KiB, "
      "20%% 1-8 MiB\n\n",
      d->spec().c_str(), d->info().name.c_str(), window);
  std::printf("| allocator | ops | ns per alloc+free |\n|---|---:|---:|\n");
  std::printf("| %s | %lld | %.0f |\n", cuda ? "cudaMalloc/cudaFree" : "aligned_alloc/free",
              static_cast<long long>(raw.ops), raw.ns_per_op);
  std::printf("| CachingAllocator | %lld | %.0f |\n", static_cast<long long>(cached.ops),
              cached.ns_per_op);
  std::printf("\nratio (device / caching): %.1fx\n", raw.ns_per_op / cached.ns_per_op);
  std::printf(
      "caching allocator: %llu device allocations for %lld requests, peak reserved "
      "%lld MiB, fragmentation %.2f\n",
      static_cast<unsigned long long>(st.device_allocs), static_cast<long long>(ops + window),
      static_cast<long long>(st.peak_reserved_bytes >> 20), st.fragmentation);
  return 0;
}
