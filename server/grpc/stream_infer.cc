#include "server/grpc/stream_infer.h"

#include <chrono>
#include <deque>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/quote.h"
#include "server/kserve/proto_codec.h"
#include "server/kserve/proto_request.h"

namespace infer {

class InferStreams::StreamReactor final : public InferStreams::Reactor {
 public:
  StreamReactor(OpenCalls<StreamReactor>* open, Engine* engine, grpc::CallbackServerContext* ctx)
      : open_(open), engine_(engine), ctx_(ctx) {}

  // OpenCalls' interface (server/grpc/open_calls.h).
  // Starts reading, or ends the stream at once if the server drains
  // (`ending`, or a drain that reached it since it was registered). Called
  // once, with no lock held; may delete this.
  void Start(bool ending) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finished_) return;  // EndAll finished it already
      if (!ending) {
        reading_ = true;
        StartRead(&request_);
        return;
      }
      finished_ = true;
    }
    Finish(EndedStatus());
  }

  // The server drains: read no more; end once what was read is answered.
  // Returns true if the caller must call FinishEnded() (outside any lock).
  bool End() {
    std::lock_guard<std::mutex> lock(mu_);
    ending_ = true;
    return ShouldFinishLocked();
  }
  void FinishEnded() { Finish(FinishStatus()); }  // may delete this

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client closed its side, the stream broke, or it was finished
      bool finish = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        reading_ = false;
        reads_done_ = true;
        finish = ShouldFinishLocked();
      }
      if (finish) Finish(FinishStatus());  // may delete this
      return;
    }
    // The message moves (swapped, not copied) to this call, so that the
    // next read can start while this request is decoded and submitted;
    // nothing of `this` is touched after Submit, which may answer at once.
    // The swap happens under the lock, before reading_ is seen false:
    // from then on another thread (OnWriteDone) may start the next read
    // into request_.
    inference::ModelInferRequest message;
    {
      std::lock_guard<std::mutex> lock(mu_);
      reading_ = false;
      if (finished_) {  // ended by a drain while this read completed
        request_.Clear();
        return;
      }
      ++pending_;
      message.Swap(&request_);
      ReadMoreLocked();  // read ahead while this one runs
    }
    const std::string id = message.id();
    const std::string model = message.model_name();
    ProtoRequestSource source(&message);
    if (ctx_->deadline() != std::chrono::system_clock::time_point::max()) {
      source.set_deadline(absl::FromChrono(ctx_->deadline()));
    }
    grpc::CallbackServerContext* ctx = ctx_;
    source.set_is_cancelled([ctx] { return ctx->IsCancelled(); });
    engine_->Submit(source, [this, id, model](absl::StatusOr<InferResponse> result) {
      Answer(std::move(result), id, model);
    });
  }

  void OnWriteDone(bool ok) override {
    bool finish = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.pop_front();
      if (!ok) {
        broken_ = true;  // the client is gone: drop what is left
        queue_.clear();
      }
      if (!queue_.empty()) {
        StartWrite(&queue_.front());
      } else {
        writing_ = false;
      }
      ReadMoreLocked();
      finish = ShouldFinishLocked();
    }
    if (finish) Finish(FinishStatus());  // may delete this
  }

  void OnDone() override {
    open_->Closed(this);
    delete this;
  }

 private:
  static grpc::Status EndedStatus() {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "the server is shutting down; open a new stream (another server will "
                        "take it)");
  }

  // OK when the client closed its side (or is gone); UNAVAILABLE when a
  // drain ended the stream first.
  grpc::Status FinishStatus() {
    std::lock_guard<std::mutex> lock(mu_);
    return reads_done_ || broken_ ? grpc::Status::OK : EndedStatus();
  }

  void Answer(absl::StatusOr<InferResponse> result, const std::string& id,
              const std::string& model) {
    inference::ModelStreamInferResponse out;
    if (result.ok()) {
      ResponseToProto(*std::move(result), out.mutable_infer_response());
    } else {
      out.set_error_message(BoundedMessage(absl::StrCat(
          absl::StatusCodeToString(result.status().code()), ": ", result.status().message())));
      out.mutable_infer_response()->set_id(id);
      out.mutable_infer_response()->set_model_name(model);
    }
    bool finish = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      --pending_;
      if (!broken_) {
        queue_.push_back(std::move(out));
        if (!writing_) {
          writing_ = true;
          StartWrite(&queue_.front());
        }
      }
      finish = ShouldFinishLocked();
    }
    if (finish) Finish(FinishStatus());  // may delete this
  }

  // Starts the next read unless one is outstanding, the client has closed
  // its side, the stream broke or is ending, or too many requests are in
  // flight.
  void ReadMoreLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (reading_ || reads_done_ || broken_ || ending_ || finished_) return;
    if (pending_ + static_cast<int64_t>(queue_.size()) >= kMaxInFlight) return;
    reading_ = true;
    StartRead(&request_);
  }

  // True once (and only once) the stream is done: the client closed its
  // side or broke, or a drain ends it, and every request read is answered
  // and written. (A read still outstanding when a drain ends the stream
  // completes not-ok after Finish.) The caller calls Finish() after
  // releasing mu_ and touches nothing of this after it: gRPC may run OnDone
  // (delete this) on another thread as soon as Finish is called, which must
  // not happen while mu_ is held.
  bool ShouldFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || pending_ > 0 || writing_) return false;
    if (!(reads_done_ || broken_ || ending_)) return false;
    if (reading_ && !ending_) return false;
    finished_ = true;
    return true;
  }

  OpenCalls<StreamReactor>* const open_;
  Engine* const engine_;
  grpc::CallbackServerContext* const ctx_;
  inference::ModelInferRequest request_;  // the read in progress

  std::mutex mu_;
  std::deque<inference::ModelStreamInferResponse> queue_ ABSL_GUARDED_BY(mu_);  // front: writing
  int64_t pending_ ABSL_GUARDED_BY(mu_) = 0;  // read, not yet answered
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool ending_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

InferStreams::Reactor* InferStreams::Open(grpc::CallbackServerContext* ctx) {
  return open_.Open(new StreamReactor(&open_, engine_, ctx));
}

void InferStreams::EndAll() { open_.EndAll(); }

}  // namespace infer
