#include "server/grpc/health_service.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/quote.h"

namespace infer {
namespace {

using grpc::health::v1::HealthCheckResponse;

constexpr char kServiceName[] = "inference.GRPCInferenceService";

bool KnownService(const std::string& service) { return service.empty() || service == kServiceName; }

}  // namespace

class HealthService::Watcher final : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  Watcher(OpenCalls<Watcher>* open, HealthCheckResponse::ServingStatus status, bool known)
      : open_(open), known_(known), first_(status) {}

  // OpenCalls' interface (server/grpc/open_calls.h).
  // Sends the first status, or ends at once when the server is stopping.
  // Called once, with no lock held; may delete this.
  void Start(bool ending) {
    const HealthCheckResponse::ServingStatus status = first_;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finished_) return;  // EndAll got here first
      if (!ending) {
        WriteLocked(status);
        return;
      }
      finished_ = true;
    }
    Finish(grpc::Status::OK);
  }

  // Sends `status` if it differs from the last one sent.
  void Update(HealthCheckResponse::ServingStatus status) {
    if (!known_) return;  // SERVICE_UNKNOWN does not change
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_ || end_wanted_) return;
    latest_ = status;
    if (!writing_ && latest_ != sent_) WriteLocked(latest_);
  }

  // The server stops: true if the caller must call Finish (outside any
  // lock); else it finishes after its write (or has finished).
  bool End() {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return false;
    if (writing_) {
      end_wanted_ = true;
      return false;
    }
    finished_ = true;
    return true;
  }
  void FinishEnded() { Finish(grpc::Status::OK); }  // may delete this

  void OnWriteDone(bool ok) override {
    grpc::Status finish_with;
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      if (finished_) return;
      if (ok && !end_wanted_) {
        if (latest_ != sent_) WriteLocked(latest_);
        return;
      }
      finished_ = true;
      finish_with = ok ? grpc::Status::OK : grpc::Status::CANCELLED;
    }
    Finish(finish_with);  // may delete this
  }

  void OnCancel() override {  // the client went away
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finished_) return;
      finished_ = true;
    }
    Finish(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    open_->Closed(this);
    delete this;
  }

 private:
  void WriteLocked(HealthCheckResponse::ServingStatus status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    response_.set_status(known_ ? status : HealthCheckResponse::SERVICE_UNKNOWN);
    sent_ = latest_ = status;
    writing_ = true;
    StartWrite(&response_);
  }

  OpenCalls<Watcher>* const open_;
  const bool known_;                                // an unknown service is always SERVICE_UNKNOWN
  const HealthCheckResponse::ServingStatus first_;  // the status when it opened
  std::mutex mu_;
  HealthCheckResponse response_ ABSL_GUARDED_BY(mu_);  // the write in progress
  HealthCheckResponse::ServingStatus sent_ ABSL_GUARDED_BY(mu_) = HealthCheckResponse::UNKNOWN;
  HealthCheckResponse::ServingStatus latest_ ABSL_GUARDED_BY(mu_) = HealthCheckResponse::UNKNOWN;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool end_wanted_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

HealthCheckResponse::ServingStatus HealthService::Status() const {
  return engine_->Ready() ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
}

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* ctx,
                                               const grpc::health::v1::HealthCheckRequest* request,
                                               HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (!KnownService(request->service())) {
    reactor->Finish(grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        absl::StrCat("unknown service ", Quote(request->service()), "; this server has '",
                     kServiceName, "' (or '' for the whole server)")));
    return reactor;
  }
  response->set_status(Status());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>* HealthService::Watch(
    grpc::CallbackServerContext*, const grpc::health::v1::HealthCheckRequest* request) {
  return watchers_.Open(new Watcher(&watchers_, Status(), KnownService(request->service())));
}

void HealthService::Refresh() {
  const HealthCheckResponse::ServingStatus status = Status();
  watchers_.ForEach([status](Watcher* w) { w->Update(status); });
}

void HealthService::EndAll() { watchers_.EndAll(); }

}  // namespace infer
