// batcher-bench: what one arrival costs the batcher, against how many
// requests already wait. Per arrival the batcher's worker does what
// DynamicBatcher::WorkerLoop does on a wake: Push, then PopBatch, then
// NextDeadline, under its mutex (which Submit also needs). The waiting
// requests cannot launch (the device pipeline is full, or memory is not
// free), the case where queues grow deep. Reports ns per arrival for each
// depth; a batcher whose cost is independent of depth shows a flat column.
//
//   build/bin/batcher-bench [--depths 10,100,1000,10000,100000] [--arrivals 2000]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "CLI/CLI.hpp"
#include "batching/batch_queue.h"

namespace {

struct Task {
  int64_t rows = 1, len = 32;
  int level = 1;
  absl::Time due = absl::InfiniteFuture();
  int64_t size() const { return rows; }
  int64_t length() const { return len; }
  int64_t tokens() const { return rows * len; }
  int priority() const { return level; }
  absl::Time deadline() const { return due; }
  bool cancelled() const { return false; }
};

// Memory for nothing: every batch waits for memory to be freed.
class FullGate final : public infer::MemoryGate {
 public:
  int64_t PeakBytes(const infer::BatchShape& shape) const override { return shape.rows * 1024; }
  int64_t AvailableBytes() const override { return 0; }
  int64_t CapacityBytes() const override { return int64_t{1} << 40; }

 private:
  bool TryReserve(int64_t) override { return false; }
  void Release(int64_t) override {}
};

// ns per arrival with `depth` requests already queued.
double Measure(int64_t depth, int arrivals, int levels, bool launch) {
  infer::QueueOptions q;
  q.max_batch_size = 32;
  q.max_queue_delay = absl::Milliseconds(1);
  q.max_queue_size = depth + arrivals + 1;
  q.priority_levels = levels;
  q.length_buckets = {16, 32, 64, 128};
  FullGate gate;
  infer::BatchQueue<Task> queue(q, &gate);
  absl::Time now = absl::UnixEpoch();
  auto make = [&](int64_t i) {
    auto t = std::make_unique<Task>();
    t->len = 8 + (i * 37) % 120;
    t->level = 1 + static_cast<int>(i % levels);
    t->due = now + absl::Hours(1);
    return t;
  };
  for (int64_t i = 0; i < depth; ++i) {
    auto t = make(i);
    if (!queue.Push(&t, now).ok()) std::abort();
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < arrivals; ++i) {
    now += absl::Microseconds(1);
    auto t = make(depth + i);
    if (!queue.Push(&t, now).ok()) std::abort();
    auto batch = queue.PopBatch(now, false, launch);
    if (!batch.tasks.empty()) std::abort();  // nothing may launch here
    volatile absl::Time next = queue.NextDeadline(now);
    (void)next;
  }
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / arrivals;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> depths = {10, 100, 1000, 10000, 100000};
  int arrivals = 2000;
  CLI::App app{"batcher-bench: batcher cost per arrival against queue depth"};
  app.add_option("--depths", depths, "requests already waiting")->delimiter(',');
  app.add_option("--arrivals", arrivals, "arrivals timed per depth")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::printf(
      "batcher-bench: ns per arrival (Push + PopBatch + NextDeadline), 4 length buckets\n\n");
  std::printf(
      "| queued | pipeline full, 1 level | pipeline full, 2 levels | memory full, 2 levels |\n");
  std::printf("|---:|---:|---:|---:|\n");
  for (int64_t d : depths) {
    std::printf("| %lld | %.0f | %.0f | %.0f |\n", static_cast<long long>(d),
                Measure(d, arrivals, 1, false), Measure(d, arrivals, 2, false),
                Measure(d, arrivals, 2, true));
    std::fflush(stdout);
  }
  return 0;
}
