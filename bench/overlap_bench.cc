// overlap-bench: does the device pipeline hide the copies behind the compute?
// The same batches run twice, side by side in one process:
//   serial     each batch: upload, wait; compute, wait; download, wait
//              (the stage times are measured separately, giving the sum of
//              copy time and compute time)
//   pipelined  all batches through DevicePipeline (three stages, three
//              streams, ordered by events; several batches in flight)
// and the ratio pipelined / serial is printed, with the best achievable
// ratio max(copy, compute) / (copy + compute) beside it.
//
//   build/bin/overlap-bench [--device cpu|cuda:0] [--batches N] [--n N] [--gemms R]
//
// Each batch uploads an n×n FP32 matrix from staging memory, multiplies it R
// times by a resident n×n matrix (SGEMM), and downloads the n×n result.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <future>
#include <vector>

#include "runtime/caching_allocator.h"
#include "runtime/device.h"
#include "runtime/pipeline.h"
#include "runtime/staging_pool.h"

namespace {

using Clock = std::chrono::steady_clock;
double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Setup {
  infer::Device* device;
  infer::CachingAllocator* allocator;
  infer::HostStagingPool* staging;
  const float* weights;  // device, n×n
  int64_t n;
  int gemms;
};

class MatJob final : public infer::PipelineJob {
 public:
  MatJob(const Setup& s, std::promise<void>* done) : s_(s), done_(done) {}

  absl::Status Upload(infer::Stream* stream) override {
    const size_t bytes = s_.n * s_.n * sizeof(float);
    auto host = s_.staging->Acquire(bytes);
    if (!host.ok()) return host.status();
    host_in_ = *std::move(host);
    float* h = host_in_.as<float>();
    for (int64_t i = 0; i < s_.n * s_.n; ++i) h[i] = static_cast<float>(i % 7) * 0.01f;
    auto in = infer::DeviceBuffer::Allocate(s_.allocator, bytes, stream);
    if (!in.ok()) return in.status();
    in_ = *std::move(in);
    return s_.device->CopyToDevice(in_.get(), h, bytes, stream);
  }
  absl::Status Compute(infer::Stream* stream) override {
    const size_t bytes = s_.n * s_.n * sizeof(float);
    auto a = infer::DeviceBuffer::Allocate(s_.allocator, bytes, stream);
    auto b = infer::DeviceBuffer::Allocate(s_.allocator, bytes, stream);
    if (!a.ok() || !b.ok()) return absl::ResourceExhaustedError("compute buffers");
    (void)s_.allocator->RecordStream(in_.get(), stream);
    infer::GemmArgs g;
    g.m = g.n = g.k = s_.n;
    g.lda = g.ldb = g.ldc = s_.n;
    g.b = s_.weights;
    const float* src = in_.as<float>();
    for (int r = 0; r < s_.gemms; ++r) {
      float* dst = (r % 2 == 0 ? a : b)->as<float>();
      g.a = src;
      g.c = dst;
      if (absl::Status st = s_.device->Sgemm(stream, g); !st.ok()) return st;
      src = dst;
    }
    out_ = std::move(s_.gemms % 2 == 1 ? *a : *b);
    return absl::OkStatus();
  }
  absl::Status Download(infer::Stream* stream) override {
    const size_t bytes = s_.n * s_.n * sizeof(float);
    auto host = s_.staging->Acquire(bytes);
    if (!host.ok()) return host.status();
    host_out_ = *std::move(host);
    (void)s_.allocator->RecordStream(out_.get(), stream);
    return s_.device->CopyToHost(host_out_.data(), out_.get(), bytes, stream);
  }
  void Complete(absl::Status status) override {
    if (!status.ok()) std::fprintf(stderr, "batch failed: %s\n", status.ToString().c_str());
    done_->set_value();
  }

 private:
  const Setup s_;
  std::promise<void>* done_;
  infer::StagingBuffer host_in_, host_out_;
  infer::DeviceBuffer in_, out_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string spec = infer::DefaultDeviceSpec();
  int batches = 24;
  int64_t n = 1024;
  int gemms = 2;
  int in_flight = 3;
  CLI::App app{"overlap-bench: pipelined copy/compute vs the serial sum"};
  app.add_option("--device", spec, "cpu or cuda:N")->capture_default_str();
  app.add_option("--batches", batches, "batches per run")->capture_default_str();
  app.add_option("--n", n, "matrix size (n×n FP32 in and out per batch)")->capture_default_str();
  app.add_option("--gemms", gemms, "SGEMMs per batch")->capture_default_str();
  app.add_option("--in-flight", in_flight, "pipeline depth")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  auto device = infer::CreateDevice(spec);
  if (!device.ok()) {
    std::fprintf(stderr, "%s\n", device.status().ToString().c_str());
    return 1;
  }
  infer::Device* d = device->get();
  infer::CachingAllocatorOptions ao;
  ao.budget_bytes = std::min<int64_t>(d->info().total_memory_bytes / 2, int64_t{8} << 30);
  auto allocator = infer::CachingAllocator::Create(d, ao);
  infer::StagingPoolOptions so;
  so.max_bytes = int64_t{2} << 30;
  auto staging = infer::HostStagingPool::Create(d, so);
  auto setup_stream = d->CreateStream();
  if (!allocator.ok() || !staging.ok() || !setup_stream.ok()) return 1;
  const size_t bytes = n * n * sizeof(float);
  auto weights = infer::DeviceBuffer::Allocate(allocator->get(), bytes, setup_stream->get());
  std::vector<float> w(n * n, 0.001f);
  if (!weights.ok() ||
      !d->CopyToDevice(weights->get(), w.data(), bytes, setup_stream->get()).ok() ||
      !d->SynchronizeStream(setup_stream->get()).ok()) {
    return 1;
  }
  Setup s{d, allocator->get(), staging->get(), weights->as<float>(), n, gemms};

  // Serial: one stream, wait after every stage, time each stage.
  auto serial_stream = d->CreateStream();
  Clock::duration copy{}, compute{};
  std::vector<std::promise<void>> serial_done(batches + 1);
  const auto serial_start = Clock::now();
  for (int b = 0; b <= batches; ++b) {  // batch 0 warms up and is not counted
    MatJob job(s, &serial_done[b]);
    infer::Stream* st = serial_stream->get();
    auto t0 = Clock::now();
    (void)job.Upload(st);
    (void)d->SynchronizeStream(st);
    auto t1 = Clock::now();
    (void)job.Compute(st);
    (void)d->SynchronizeStream(st);
    auto t2 = Clock::now();
    (void)job.Download(st);
    (void)d->SynchronizeStream(st);
    auto t3 = Clock::now();
    job.Complete(absl::OkStatus());
    if (b > 0) {
      copy += (t1 - t0) + (t3 - t2);
      compute += t2 - t1;
    }
  }
  (void)serial_start;
  const double serial_ms = Ms(copy + compute);

  // Pipelined.
  infer::PipelineOptions po;
  po.max_in_flight = in_flight;
  auto pipeline = infer::DevicePipeline::Create(d, po);
  if (!pipeline.ok()) return 1;
  std::vector<std::promise<void>> done(batches);
  const auto start = Clock::now();
  for (int b = 0; b < batches; ++b) {
    std::unique_ptr<infer::PipelineJob> job = std::make_unique<MatJob>(s, &done[b]);
    if (!(*pipeline)->Submit(&job).ok()) return 1;
  }
  for (auto& p : done) p.get_future().wait();
  const double pipelined_ms = Ms(Clock::now() - start);
  (*pipeline)->Shutdown();

  const double copy_ms = Ms(copy), compute_ms = Ms(compute);
  std::printf(
      "overlap-bench on %s (%s): %d batches, %lldx%lld FP32 in and out "
      "(%.1f MiB each way), %d SGEMMs per batch, %d in flight\n\n",
      d->spec().c_str(), d->info().name.c_str(), batches, static_cast<long long>(n),
      static_cast<long long>(n), bytes / 1048576.0, gemms, in_flight);
  std::printf("| run | ms | ms per batch |\n|---|---:|---:|\n");
  std::printf("| serial: copies | %.1f | %.2f |\n", copy_ms, copy_ms / batches);
  std::printf("| serial: compute | %.1f | %.2f |\n", compute_ms, compute_ms / batches);
  std::printf("| serial: sum | %.1f | %.2f |\n", serial_ms, serial_ms / batches);
  std::printf("| pipelined | %.1f | %.2f |\n", pipelined_ms, pipelined_ms / batches);
  const double ideal = std::max(copy_ms, compute_ms) / (copy_ms + compute_ms);
  std::printf(
      "\nratio pipelined / serial: %.2f (best possible %.2f: all of the shorter "
      "part hidden)\n",
      pipelined_ms / serial_ms, ideal);
  const double hidden = (serial_ms - pipelined_ms) / std::min(copy_ms, compute_ms);
  std::printf("share of the shorter part (%s) hidden: %.0f%%\n",
              copy_ms < compute_ms ? "copies" : "compute", 100.0 * hidden);
  return 0;
}
