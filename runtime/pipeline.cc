#include "runtime/pipeline.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace infer {

struct DevicePipeline::Item {
  std::unique_ptr<PipelineJob> job;
  std::unique_ptr<Event> event;  // re-recorded by each stage that ran
  bool recorded = false;
  absl::Status status;  // the first failure, if any
};

void DevicePipeline::Channel::Push(std::unique_ptr<Item> item) {
  std::lock_guard<std::mutex> lock(mu_);
  items_.push_back(std::move(item));
  cv_.notify_one();
}

std::unique_ptr<DevicePipeline::Item> DevicePipeline::Channel::Pop() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return closed_ || !items_.empty(); });
  if (items_.empty()) return nullptr;
  std::unique_ptr<Item> item = std::move(items_.front());
  items_.pop_front();
  return item;
}

void DevicePipeline::Channel::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  cv_.notify_all();
}

absl::StatusOr<std::unique_ptr<DevicePipeline>> DevicePipeline::Create(
    Device* device, const PipelineOptions& options) {
  if (device == nullptr) return absl::InvalidArgumentError("device is null");
  if (options.max_in_flight < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_in_flight must be >= 1, got ", options.max_in_flight));
  }
  std::unique_ptr<DevicePipeline> p(new DevicePipeline(device, options.max_in_flight));
  p->on_room_ = options.on_room;
  if (absl::Status s = p->Init(options.allocator, options.fuse_stages); !s.ok()) return s;
  return p;
}

DevicePipeline::DevicePipeline(Device* device, int max_in_flight)
    : device_(device), max_in_flight_(max_in_flight) {}

absl::Status DevicePipeline::Init(CachingAllocator* allocator, bool fuse_stages) {
  for (std::unique_ptr<Stream>* s : {&h2d_, &d2h_}) {
    absl::StatusOr<std::unique_ptr<Stream>> stream = device_->CreateStream(StreamKind::kCopy);
    if (!stream.ok()) return stream.status();
    *s = *std::move(stream);
  }
  absl::StatusOr<ComputeStream> compute = ComputeStream::Create(device_, allocator);
  if (!compute.ok()) return compute.status();
  compute_ = *std::move(compute);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < max_in_flight_; ++i) {
      absl::StatusOr<std::unique_ptr<Event>> event = device_->CreateEvent();
      if (!event.ok()) return event.status();
      spare_events_.push_back(*std::move(event));
    }
  }
  if (fuse_stages) {
    threads_.emplace_back([this] { StageLoop(0, 2, &upload_in_, &complete_in_); });
  } else {
    threads_.emplace_back([this] { StageLoop(0, 0, &upload_in_, &compute_in_); });
    threads_.emplace_back([this] { StageLoop(1, 1, &compute_in_, &download_in_); });
    threads_.emplace_back([this] { StageLoop(2, 2, &download_in_, &complete_in_); });
  }
  threads_.emplace_back([this] { CompleteLoop(); });
  return absl::OkStatus();
}

DevicePipeline::~DevicePipeline() { Shutdown(); }

absl::Status DevicePipeline::Submit(std::unique_ptr<PipelineJob>* job) {
  std::unique_lock<std::mutex> lock(mu_);
  space_.wait(lock, [this] { return shutting_down_ || stats_.in_flight < max_in_flight_; });
  if (shutting_down_) return absl::UnavailableError("the device pipeline is shutting down");
  auto item = std::make_unique<Item>();
  item->job = std::move(*job);
  // One spare per slot: in_flight < max_in_flight leaves one.
  item->event = std::move(spare_events_.back());
  spare_events_.pop_back();
  ++stats_.in_flight;
  ++stats_.submitted;
  stats_.peak_in_flight = std::max(stats_.peak_in_flight, stats_.in_flight);
  // Under mu_, so Shutdown cannot close the channel between the check and
  // the push.
  upload_in_.Push(std::move(item));
  return absl::OkStatus();
}

void DevicePipeline::StageLoop(int first, int last, Channel* in, Channel* out) {
  Stream* const streams[3] = {h2d_.get(), compute_.get(), d2h_.get()};
  while (std::unique_ptr<Item> item = in->Pop()) {
    for (int stage = first; stage <= last && item->status.ok(); ++stage) {
      Stream* stream = streams[stage];
      absl::Status s;
      if (item->recorded) s = device_->StreamWaitEvent(stream, item->event.get());
      if (s.ok()) {
        PipelineJob* job = item->job.get();
        s = stage == 0   ? job->Upload(stream)
            : stage == 1 ? job->Compute(stream)
                         : job->Download(stream);
      }
      // Record even after a failure: whatever was enqueued must finish before
      // the job's buffers are released.
      const absl::Status r = device_->RecordEvent(item->event.get(), stream);
      if (r.ok()) item->recorded = true;
      item->status = s.ok() ? r : s;
    }
    out->Push(std::move(item));
  }
  out->Close();
}

void DevicePipeline::CompleteLoop() {
  while (std::unique_ptr<Item> item = complete_in_.Pop()) {
    if (item->recorded) {
      const absl::Status s = device_->SynchronizeEvent(item->event.get());
      if (item->status.ok()) item->status = s;
    }
    const bool ok = item->status.ok();
    std::unique_ptr<PipelineJob> job = std::move(item->job);
    job->Complete(std::move(item->status));  // the job's buffers go, after its device work
    {
      std::lock_guard<std::mutex> lock(mu_);
      spare_events_.push_back(std::move(item->event));
      --stats_.in_flight;
      ++(ok ? stats_.completed : stats_.failed);
      space_.notify_all();
    }
    item.reset();
    if (on_room_) on_room_();
    job->Respond();
  }
}

void DevicePipeline::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutting_down_ = true;
    upload_in_.Close();
    space_.notify_all();
  }
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

bool DevicePipeline::HasRoom() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !shutting_down_ && stats_.in_flight < max_in_flight_;
}

PipelineStats DevicePipeline::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace infer
