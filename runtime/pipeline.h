// DevicePipeline: the per-device executor. Batches (jobs) pass through four
// stages, each on its own thread, so several batches are in flight at once:
//
//   upload    job->Upload(h2d stream)          host→device copies
//   compute   job->Compute(compute stream)     kernels, GEMMs
//   download  job->Download(d2h stream)        device→host copies
//   complete  job->Complete(status)            after the download finished:
//                                              release memory, build results
//             (the job's slot is released)
//             job->Respond()                   answer the requests
//
// Design notes and invariants
// - Overlap: while batch N computes, batch N+1 uploads and batch N−1
//   downloads (unless fuse_stages: see below). On a GPU the stage threads only enqueue work; the
//   copy engines and the SMs run it concurrently. On the CPU every enqueued operation runs in the
//   calling stage thread, so the same overlap happens between threads, and the ordering logic is
//   exercised without a GPU.
// - Ordering is by events, never by device-wide synchronisation: each stage
//   records an event on its stream after enqueuing; the next stage's stream
//   waits for that event before its own work (cudaStreamWaitEvent). Of the
//   pipeline's threads only the completion thread waits for the device, on
//   the job's last event (a blocking-sync event: it sleeps, it does not
//   spin). The stage threads may block too, but only where a job's own stage
//   code does (e.g. a model that needs a result on the host mid-stage).
// - Events are pooled: max_in_flight of them are made at start and reused,
//   one per job in flight; none is created or destroyed per batch.
// - Streams: the upload and download streams are copy streams (no GEMM
//   handle); the compute stream is a ComputeStream with its GEMM workspace
//   from the allocator when PipelineOptions::allocator is set.
// - Each stage takes jobs in submission order (FIFO), so jobs complete in
//   submission order.
// - Bounded: at most max_in_flight jobs are between Submit and Complete;
//   Submit blocks while the pipeline is full (back-pressure to the batcher,
//   whose queue is bounded in turn).
// - Failure: a stage that fails sends its job straight to completion with
//   the error; the completion thread still waits for whatever the job had
//   already enqueued before calling Complete, so buffers are never freed
//   under running copies or kernels. Complete is called exactly once per
//   submitted job, including at Shutdown (which drains).
// - Memory rule for jobs: release device and staging buffers in Complete (or
//   later), when every stream has finished with them.
// - Release, then answer: Complete releases what the job holds; the
//   pipeline then frees the job's slot (on_room) before calling Respond, so
//   sending the answers never delays the next batch's launch.
//
// - fuse_stages: one thread runs upload, compute and download of a job in
//   turn (each on its own stream, ordered by the same events), then hands
//   the job to the completion thread: two thread hand-offs less per batch,
//   no overlap between one job's copies and another's compute. For the CPU
//   device, where copies are memcpy on the cores that compute and the
//   stages could not overlap usefully anyway (the engine sets it there).
//
// Thread-safe.
#ifndef INFER_RUNTIME_PIPELINE_H_
#define INFER_RUNTIME_PIPELINE_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/caching_allocator.h"
#include "runtime/compute_stream.h"
#include "runtime/device.h"

namespace infer {

// One batch's work, split in stages. Each method is called once, in order;
// each stage may run on a different thread (with fuse_stages, Upload,
// Compute and Download run on one), so a job keeps no thread-local state
// between them. A stage's failure skips the later ones.
class PipelineJob {
 public:
  virtual ~PipelineJob() = default;
  virtual absl::Status Upload(Stream* stream) = 0;
  virtual absl::Status Compute(Stream* stream) = 0;
  virtual absl::Status Download(Stream* stream) = 0;
  // The job's device work is finished (or a stage failed with `status`):
  // release the job's memory and prepare its results.
  virtual void Complete(absl::Status status) = 0;
  // Called once after Complete, when the job no longer counts against
  // max_in_flight: send the results.
  virtual void Respond() {}
};

struct PipelineOptions {
  // Most jobs between Submit and Complete (>= 1; 3 fills every stage).
  int max_in_flight = 3;
  // Called (on the completion thread, with no lock held) each time a job
  // has left the pipeline, i.e. when HasRoom() may have turned true.
  std::function<void()> on_room;
  // Where the compute stream's GEMM workspace comes from (borrowed; must
  // outlive the pipeline). Null: no workspace is set (the GEMM library's
  // own default applies).
  CachingAllocator* allocator = nullptr;
  // Upload, compute and download of a job on one thread (see the design
  // notes); false: a thread each.
  bool fuse_stages = false;
};

struct PipelineStats {
  uint64_t submitted = 0;
  uint64_t completed = 0;
  uint64_t failed = 0;
  int in_flight = 0;
  int peak_in_flight = 0;
};

class DevicePipeline {
 public:
  // `device` is borrowed and must outlive the pipeline.
  static absl::StatusOr<std::unique_ptr<DevicePipeline>> Create(Device* device,
                                                                const PipelineOptions& options);
  ~DevicePipeline();  // Shutdown()
  DevicePipeline(const DevicePipeline&) = delete;
  DevicePipeline& operator=(const DevicePipeline&) = delete;

  // Ownership of *job is transferred iff OK. Blocks while max_in_flight jobs
  // are in flight. UNAVAILABLE after Shutdown began.
  absl::Status Submit(std::unique_ptr<PipelineJob>* job);

  // Stops accepting, lets every submitted job complete, joins the threads.
  // Idempotent; not to be called concurrently with itself.
  void Shutdown();

  PipelineStats stats() const;
  // True when a Submit now would not block.
  bool HasRoom() const;
  // Sets PipelineOptions::on_room after creation (before the first Submit).
  void set_on_room(std::function<void()> fn) { on_room_ = std::move(fn); }
  Device* device() const { return device_; }
  // Device bytes the compute stream's GEMM workspace holds (0 if none).
  int64_t workspace_bytes() const { return compute_.workspace_bytes(); }

 private:
  struct Item;
  // A FIFO hand-off between two stages; closed when the upstream is done.
  class Channel {
   public:
    void Push(std::unique_ptr<Item> item);
    std::unique_ptr<Item> Pop();  // null once closed and empty
    void Close();

   private:
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::unique_ptr<Item>> items_ ABSL_GUARDED_BY(mu_);
    bool closed_ ABSL_GUARDED_BY(mu_) = false;
  };

  DevicePipeline(Device* device, int max_in_flight);
  absl::Status Init(CachingAllocator* allocator, bool fuse_stages);
  // Runs one stage: waits on the previous stage's event, calls `work`,
  // records this stage's event, and hands the item on.
  // Runs stages first..last (0 upload, 1 compute, 2 download) of each job
  // from `in`, then passes it to `out`.
  void StageLoop(int first, int last, Channel* in, Channel* out);
  void CompleteLoop();

  // Constant after Init.
  Device* const device_;
  const int max_in_flight_;
  std::function<void()> on_room_;
  std::unique_ptr<Stream> h2d_, d2h_;
  ComputeStream compute_;
  Channel upload_in_, compute_in_, download_in_, complete_in_;
  std::vector<std::thread> threads_;

  mutable std::mutex mu_;
  std::condition_variable space_;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::unique_ptr<Event>> spare_events_ ABSL_GUARDED_BY(mu_);
  PipelineStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace infer

#endif  // INFER_RUNTIME_PIPELINE_H_
