#include "server/grpc_server.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <fstream>
#include <mutex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "grpc_service.grpc.pb.h"
#include "health.grpc.pb.h"
#include "runtime/build_config.h"
#include "runtime/status_macros.h"
#include "server/proto_codec.h"
#include "server/status_map.h"

namespace infer {
namespace {

constexpr char kServiceName[] = "inference.GRPCInferenceService";
constexpr char kModelVersion[] = "1";

// Every model has one version, "1"; an empty version means the latest.
absl::Status CheckVersion(const std::string& model, const std::string& version) {
  if (version.empty() || version == kModelVersion) return absl::OkStatus();
  return absl::NotFoundError(
      absl::StrCat("model '", model, "' has no version '", version, "'; available versions: 1"));
}

void FillTensorMetadata(const TensorSpec& spec,
                        inference::ModelMetadataResponse::TensorMetadata* out) {
  out->set_name(spec.name);
  out->set_datatype(std::string(DataTypeName(spec.dtype)));
  for (int64_t d : spec.shape) out->add_shape(d);
}

// The request limits that need only the declared shapes, checked on the
// protobuf before RequestFromProto copies any contents (typed contents
// can be a few times larger decoded than on the wire). An unknown model
// passes: the engine names it.
absl::Status CheckDeclaredLimits(Engine& engine, const inference::ModelInferRequest& req) {
  std::vector<DeclaredInput> inputs;
  inputs.reserve(static_cast<size_t>(req.inputs_size()));
  int64_t text_bytes = 0;
  for (int i = 0; i < req.inputs_size(); ++i) {
    const auto& in = req.inputs(i);
    inputs.push_back({in.name(), absl::MakeConstSpan(in.shape().data(), in.shape().size())});
    if (in.datatype() != "BYTES") continue;
    if (i < req.raw_input_contents_size()) {
      text_bytes += static_cast<int64_t>(req.raw_input_contents(i).size());
    }
    for (const std::string& b : in.contents().bytes_contents()) {
      text_bytes += 4 + static_cast<int64_t>(b.size());  // as in the raw layout
    }
  }
  return engine.CheckDeclared(req.model_name(), inputs, text_bytes);
}

// The front end's part of a ModelInfer request, before it is submitted: the
// model version, the limits on the declared shapes, then decoding (which
// moves the raw payloads out of `req`). A refusal is counted in the model's
// statistics when the model is loaded.
absl::StatusOr<InferRequest> DecodeInferRequest(Engine& engine, inference::ModelInferRequest* req) {
  if (absl::Status s = CheckVersion(req->model_name(), req->model_version()); !s.ok()) {
    engine.RecordRefused(req->model_name(), s);
    return s;
  }
  INFER_RETURN_IF_ERROR(CheckDeclaredLimits(engine, *req));  // counted by the engine
  absl::StatusOr<InferRequest> converted = RequestFromProto(req);
  if (!converted.ok()) {
    engine.RecordRefused(req->model_name(), converted.status());
  } else {
    converted->declared_limits_checked = true;  // admission need not check them again
  }
  return converted;
}

void FillDuration(const DurationStat& d, inference::StatisticDuration* out) {
  out->set_count(d.count);
  out->set_ns(d.ns);
}

// ModelStreamInfer: each request read from the stream is submitted to the
// engine at once; answers are written as they complete (not necessarily in
// request order: clients match them by id, as with Triton), one write at a
// time. A request's error is an answer with error_message set; the stream
// ends OK once the client has closed its side and every request is
// answered. At most kMaxInFlight requests of one stream are unanswered or
// unwritten at once: beyond that the reactor stops reading, so a client that
// sends without reading cannot grow the server's memory. Deletes itself when
// gRPC is done with it, which cannot happen before the last engine callback
// (Finish waits for them).
class StreamInferReactor final
    : public grpc::ServerBidiReactor<inference::ModelInferRequest,
                                     inference::ModelStreamInferResponse> {
 public:
  static constexpr int64_t kMaxInFlight = 256;

  StreamInferReactor(Engine* engine, grpc::CallbackServerContext* ctx)
      : engine_(engine), ctx_(ctx) {
    reading_ = true;
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client closed its side (or the stream broke)
      bool finish = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        reading_ = false;
        reads_done_ = true;
        finish = ShouldFinishLocked();
      }
      if (finish) Finish(grpc::Status::OK);  // may delete this
      return;
    }
    const std::string id = request_.id();
    const std::string model = request_.model_name();
    absl::StatusOr<InferRequest> converted = DecodeInferRequest(*engine_, &request_);
    request_.Clear();
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++pending_;
      reading_ = false;
      ReadMoreLocked();  // read ahead while this one runs
    }
    if (!converted.ok()) {
      Answer(converted.status(), id, model);
      return;
    }
    if (ctx_->deadline() != std::chrono::system_clock::time_point::max()) {
      converted->deadline = absl::FromChrono(ctx_->deadline());
    }
    grpc::CallbackServerContext* ctx = ctx_;
    converted->is_cancelled = [ctx] { return ctx->IsCancelled(); };
    engine_->Submit(*std::move(converted), [this, id, model](absl::StatusOr<InferResponse> result) {
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
    if (finish) Finish(grpc::Status::OK);  // may delete this
  }

  void OnDone() override { delete this; }

 private:
  void Answer(absl::StatusOr<InferResponse> result, const std::string& id,
              const std::string& model) {
    inference::ModelStreamInferResponse out;
    if (result.ok()) {
      ResponseToProto(*std::move(result), out.mutable_infer_response());
    } else {
      out.set_error_message(absl::StrCat(absl::StatusCodeToString(result.status().code()), ": ",
                                         result.status().message()));
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
    if (finish) Finish(grpc::Status::OK);  // may delete this
  }

  // Starts the next read unless one is outstanding, the client has closed
  // its side, the stream broke, or too many requests are in flight.
  void ReadMoreLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (reading_ || reads_done_ || broken_ || finished_) return;
    if (pending_ + static_cast<int64_t>(queue_.size()) >= kMaxInFlight) return;
    reading_ = true;
    StartRead(&request_);
  }

  // True once (and only once) the stream is done: the client closed its
  // side or broke, and every request is answered and written. The caller
  // calls Finish() after releasing mu_ and touches nothing of this after it:
  // gRPC may run OnDone (delete this) on another thread as soon as Finish
  // is called, which must not happen while mu_ is held.
  bool ShouldFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || reading_ || !(reads_done_ || broken_) || pending_ > 0 || writing_) {
      return false;
    }
    finished_ = true;
    return true;
  }

  Engine* const engine_;
  grpc::CallbackServerContext* const ctx_;
  inference::ModelInferRequest request_;  // the read in progress

  std::mutex mu_;
  std::deque<inference::ModelStreamInferResponse> queue_ ABSL_GUARDED_BY(mu_);  // front: writing
  int64_t pending_ ABSL_GUARDED_BY(mu_) = 0;  // submitted, not yet answered
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

class InferenceService final : public inference::GRPCInferenceService::CallbackService {
 public:
  explicit InferenceService(Engine* engine) : engine_(engine) {}

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* ctx,
                                       const inference::ServerLiveRequest*,
                                       inference::ServerLiveResponse* response) override {
    response->set_live(true);
    return Done(ctx, absl::OkStatus());
  }

  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* ctx,
                                        const inference::ServerReadyRequest*,
                                        inference::ServerReadyResponse* response) override {
    response->set_ready(engine_->Ready());
    return Done(ctx, absl::OkStatus());
  }

  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* ctx,
                                       const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override {
    response->set_ready(CheckVersion(request->name(), request->version()).ok() &&
                        engine_->ModelReady(request->name()));
    return Done(ctx, absl::OkStatus());
  }

  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* ctx,
                                           const inference::ServerMetadataRequest*,
                                           inference::ServerMetadataResponse* response) override {
    response->set_name("infer");
    response->set_version(INFER_VERSION);
    response->add_extensions("model_configuration");
    response->add_extensions("statistics");
    return Done(ctx, absl::OkStatus());
  }

  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* ctx,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override {
    absl::StatusOr<const ModelSpec*> spec = engine_->GetModelSpec(request->name());
    if (!spec.ok()) return Done(ctx, spec.status());
    if (absl::Status s = CheckVersion(request->name(), request->version()); !s.ok()) {
      return Done(ctx, s);
    }
    response->set_name((*spec)->name);
    response->add_versions(kModelVersion);
    response->set_platform((*spec)->platform);
    for (const TensorSpec& t : (*spec)->inputs) FillTensorMetadata(t, response->add_inputs());
    for (const TensorSpec& t : (*spec)->outputs) {
      FillTensorMetadata(t, response->add_outputs());
    }
    return Done(ctx, absl::OkStatus());
  }

  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* ctx,
                                        const inference::ModelConfigRequest* request,
                                        inference::ModelConfigResponse* response) override {
    absl::StatusOr<const ModelSpec*> spec = engine_->GetModelSpec(request->name());
    if (!spec.ok()) return Done(ctx, spec.status());
    if (absl::Status s = CheckVersion(request->name(), request->version()); !s.ok()) {
      return Done(ctx, s);
    }
    absl::StatusOr<QueueOptions> queue = engine_->GetBatchingOptions(request->name());
    if (!queue.ok()) return Done(ctx, queue.status());
    ModelConfigToProto(**spec, *queue, engine_->device()->info(), response->mutable_config());
    return Done(ctx, absl::OkStatus());
  }

  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* ctx,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override {
    // gRPC hands the request as const but owns a mutable message that is not
    // read again after this call's reactor finishes; moving the raw payloads
    // out of it avoids copying every input.
    auto* mutable_request = const_cast<inference::ModelInferRequest*>(request);
    absl::StatusOr<InferRequest> converted = DecodeInferRequest(*engine_, mutable_request);
    if (!converted.ok()) return Done(ctx, converted.status());
    if (ctx->deadline() != std::chrono::system_clock::time_point::max()) {
      converted->deadline = absl::FromChrono(ctx->deadline());
    }
    // The context lives until the reactor finishes, which happens only after
    // the engine stops looking at the request.
    converted->is_cancelled = [ctx] { return ctx->IsCancelled(); };
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    engine_->Submit(*std::move(converted),
                    [reactor, response](absl::StatusOr<InferResponse> result) {
                      if (!result.ok()) {
                        reactor->Finish(ToGrpcStatus(result.status()));
                        return;
                      }
                      ResponseToProto(*std::move(result), response);
                      reactor->Finish(grpc::Status::OK);
                    });
    return reactor;
  }

  grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
  ModelStreamInfer(grpc::CallbackServerContext* ctx) override {
    return new StreamInferReactor(engine_, ctx);
  }

  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* ctx,
                                            const inference::ModelStatisticsRequest* request,
                                            inference::ModelStatisticsResponse* response) override {
    std::vector<std::string> names;
    if (request->name().empty()) {
      names = engine_->ModelNames();
    } else {
      names.push_back(request->name());
    }
    for (const std::string& name : names) {
      absl::StatusOr<ModelStats> stats = engine_->GetModelStats(name);
      if (!stats.ok()) return Done(ctx, stats.status());
      if (absl::Status s = CheckVersion(name, request->version()); !s.ok()) {
        return Done(ctx, s);
      }
      inference::ModelStatistics* out = response->add_model_stats();
      out->set_name(name);
      out->set_version(kModelVersion);
      out->set_last_inference(stats->last_inference_ms);
      out->set_inference_count(stats->inference_count);
      out->set_execution_count(stats->execution_count);
      inference::InferStatistics* infer = out->mutable_inference_stats();
      FillDuration(stats->success, infer->mutable_success());
      FillDuration(stats->fail, infer->mutable_fail());
      FillDuration(stats->queue, infer->mutable_queue());
      FillDuration(stats->compute_input, infer->mutable_compute_input());
      FillDuration(stats->compute_infer, infer->mutable_compute_infer());
      FillDuration(stats->compute_output, infer->mutable_compute_output());
      for (const auto& [size, d] : stats->batch_stats) {
        inference::InferBatchStatistics* b = out->add_batch_stats();
        b->set_batch_size(size);
        FillDuration(d.compute_input, b->mutable_compute_input());
        FillDuration(d.compute_infer, b->mutable_compute_infer());
        FillDuration(d.compute_output, b->mutable_compute_output());
      }
    }
    return Done(ctx, absl::OkStatus());
  }

  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* ctx,
                                            const inference::RepositoryIndexRequest*,
                                            inference::RepositoryIndexResponse* response) override {
    const bool ready = engine_->Ready();
    for (const std::string& name : engine_->ModelNames()) {
      auto* m = response->add_models();
      m->set_name(name);
      m->set_version(kModelVersion);
      m->set_state(ready ? "READY" : "UNAVAILABLE");
    }
    return Done(ctx, absl::OkStatus());
  }

 private:
  static grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx,
                                        const absl::Status& status) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }

  Engine* const engine_;  // borrowed; outlives the server
};

class HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  explicit HealthService(Engine* engine) : engine_(engine) {}

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* ctx,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    if (!request->service().empty() && request->service() != kServiceName) {
      reactor->Finish(
          grpc::Status(grpc::StatusCode::NOT_FOUND,
                       absl::StrCat("unknown service '", request->service(), "'; this server has '",
                                    kServiceName, "' (or '' for the whole server)")));
      return reactor;
    }
    response->set_status(engine_->Ready() ? grpc::health::v1::HealthCheckResponse::SERVING
                                          : grpc::health::v1::HealthCheckResponse::NOT_SERVING);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  Engine* const engine_;  // borrowed; outlives the server
};

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the ", what, " file '", path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ", what, " file '", path, "' holds no PEM block"));
  }
  return text.str();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const GrpcServerOptions& options) {
  const bool cert = !options.tls_cert_file.empty(), key = !options.tls_key_file.empty();
  if (!cert && !key) {
    if (!options.tls_client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "a TLS client CA needs the server's own certificate and key (--tls-cert-file, "
          "--tls-key-file)");
    }
    return grpc::InsecureServerCredentials();
  }
  if (cert != key) {
    return absl::InvalidArgumentError(
        "TLS needs both the certificate (--tls-cert-file) and the private key (--tls-key-file)");
  }
  grpc::SslServerCredentialsOptions ssl;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  INFER_ASSIGN_OR_RETURN(pair.cert_chain, ReadPem(options.tls_cert_file, "TLS certificate"));
  INFER_ASSIGN_OR_RETURN(pair.private_key, ReadPem(options.tls_key_file, "TLS private key"));
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  if (!options.tls_client_ca_file.empty()) {
    INFER_ASSIGN_OR_RETURN(ssl.pem_root_certs,
                           ReadPem(options.tls_client_ca_file, "TLS client CA"));
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

class GrpcServer::Impl {
 public:
  explicit Impl(Engine* engine) : inference_(engine), health_(engine) {}

  InferenceService inference_;
  HealthService health_;
  std::unique_ptr<grpc::Server> server_;
  std::mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

GrpcServer::GrpcServer(std::unique_ptr<Impl> impl, int port)
    : impl_(std::move(impl)), port_(port) {}

GrpcServer::~GrpcServer() { Shutdown(absl::ZeroDuration()); }

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(const GrpcServerOptions& options,
                                                              Engine* engine) {
  if (options.max_receive_message_bytes < 1 ||
      options.max_receive_message_bytes > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("max_receive_message_bytes must be in [1, ",
                                                   std::numeric_limits<int>::max(), "], got ",
                                                   options.max_receive_message_bytes));
  }
  INFER_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                         ServerCredentials(options));
  auto impl = std::make_unique<Impl>(engine);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.address, credentials, &port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_receive_message_bytes));
  builder.SetMaxSendMessageSize(std::numeric_limits<int>::max());
  builder.RegisterService(&impl->inference_);
  builder.RegisterService(&impl->health_);
  impl->server_ = builder.BuildAndStart();
  if (impl->server_ == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on '", options.address,
                                               "' (address in use, malformed, or not permitted)"));
  }
  return std::unique_ptr<GrpcServer>(new GrpcServer(std::move(impl), port));
}

void GrpcServer::Shutdown(absl::Duration grace) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu_);
    if (impl_->shut_down_) return;
    impl_->shut_down_ = true;
  }
  impl_->server_->Shutdown(std::chrono::system_clock::now() +
                           absl::ToChronoNanoseconds(std::max(grace, absl::ZeroDuration())));
  impl_->server_->Wait();
}

}  // namespace infer
