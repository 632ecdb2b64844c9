#include "server/grpc/grpc_server.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "grpc_service.grpc.pb.h"
#include "health.grpc.pb.h"
#include "runtime/status_macros.h"
#include "server/grpc/arena_messages.h"
#include "server/grpc/health_service.h"
#include "server/grpc/status_map.h"
#include "server/grpc/stream_infer.h"
#include "server/kserve/kserve_service.h"
#include "server/kserve/proto_codec.h"
#include "server/kserve/proto_request.h"
#include "server/tls_files.h"

namespace infer {
namespace {

class InferenceService final : public inference::GRPCInferenceService::CallbackService {
 public:
  InferenceService(Engine* engine, const ApiKey* api_key)
      : engine_(engine), api_key_(api_key), streams_(engine) {
    SetMessageAllocatorFor_ModelInfer(&infer_messages_);
  }

  // Ends the open streams (see InferStreams::EndAll).
  void EndStreams() { streams_.EndAll(); }

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
    if (!Authorized(ctx)) return Done(ctx, Unauthenticated());
    response->set_ready(IsModelReady(*engine_, request->name(), request->version()));
    return Done(ctx, absl::OkStatus());
  }

  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* ctx,
                                           const inference::ServerMetadataRequest*,
                                           inference::ServerMetadataResponse* response) override {
    if (!Authorized(ctx)) return Done(ctx, Unauthenticated());
    FillServerMetadata(response);
    return Done(ctx, absl::OkStatus());
  }

  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* ctx,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override {
    if (!Authorized(ctx)) return Done(ctx, Unauthenticated());
    return Done(ctx, FillModelMetadata(*engine_, request->name(), request->version(), response));
  }

  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* ctx,
                                        const inference::ModelConfigRequest* request,
                                        inference::ModelConfigResponse* response) override {
    if (!Authorized(ctx)) return Done(ctx, Unauthenticated());
    return Done(ctx, FillModelConfig(*engine_, request->name(), request->version(), response));
  }

  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* ctx,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override {
    if (!Authorized(ctx)) return Done(ctx, Unauthenticated());
    // gRPC hands the request as const but owns a mutable message that is not
    // read again after this call's reactor finishes; moving the raw payloads
    // out of it avoids copying every input.
    ProtoRequestSource source(const_cast<inference::ModelInferRequest*>(request));
    if (ctx->deadline() != std::chrono::system_clock::time_point::max()) {
      source.set_deadline(absl::FromChrono(ctx->deadline()));
    }
    // The context lives until the reactor finishes, which happens only after
    // the engine stops looking at the request.
    source.set_is_cancelled([ctx] { return ctx->IsCancelled(); });
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    engine_->Submit(source, [reactor, response](absl::StatusOr<InferResponse> result) {
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
    if (!Authorized(ctx)) return new RefusedStream(ToGrpcStatus(Unauthenticated()));
    return streams_.Open(ctx);
  }

  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* ctx,
                                            const inference::ModelStatisticsRequest* request,
                                            inference::ModelStatisticsResponse* response) override {
    if (!Authorized(ctx)) return Done(ctx, Unauthenticated());
    return Done(ctx, FillModelStatistics(*engine_, request->name(), request->version(), response));
  }

  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* ctx,
                                            const inference::RepositoryIndexRequest*,
                                            inference::RepositoryIndexResponse* response) override {
    if (!Authorized(ctx)) return Done(ctx, Unauthenticated());
    FillRepositoryIndex(*engine_, response);
    return Done(ctx, absl::OkStatus());
  }

 private:
  // A stream refused before its first message: finished at once.
  class RefusedStream final : public grpc::ServerBidiReactor<inference::ModelInferRequest,
                                                             inference::ModelStreamInferResponse> {
   public:
    explicit RefusedStream(const grpc::Status& status) { Finish(status); }
    void OnDone() override { delete this; }
  };

  // Whether the call carries the server's API key in its `authorization`
  // metadata (always, without a key); a refusal is counted.
  bool Authorized(grpc::CallbackServerContext* ctx) const {
    if (api_key_ == nullptr || !api_key_->enabled()) return true;
    const auto& metadata = ctx->client_metadata();
    const auto it = metadata.find("authorization");
    const absl::string_view given = it == metadata.end()
                                        ? absl::string_view()
                                        : absl::string_view(it->second.data(), it->second.size());
    if (api_key_->Allows(given)) return true;
    api_key_->CountRefusal(ApiKey::kGrpc);
    return false;
  }
  static absl::Status Unauthenticated() {
    return absl::UnauthenticatedError(
        "this server needs an API key: send it as the metadata authorization: Bearer KEY");
  }

  static grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx,
                                        const absl::Status& status) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }

  Engine* const engine_;         // borrowed; outlives the server
  const ApiKey* const api_key_;  // borrowed; may be null
  InferStreams streams_;
  // ModelInfer's messages, on an arena per call.
  ArenaMessageAllocator<inference::ModelInferRequest, inference::ModelInferResponse>
      infer_messages_;
};

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const GrpcServerOptions& options) {
  INFER_ASSIGN_OR_RETURN(
      std::optional<TlsPem> pem,
      ReadTlsFiles(options.tls_cert_file, options.tls_key_file, options.tls_client_ca_file));
  if (!pem.has_value()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  pair.cert_chain = std::move(pem->cert_chain);
  pair.private_key = std::move(pem->private_key);
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  if (!pem->client_ca.empty()) {
    ssl.pem_root_certs = std::move(pem->client_ca);
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

class GrpcServer::Impl {
 public:
  Impl(Engine* engine, const ApiKey* api_key) : inference_(engine, api_key), health_(engine) {}

  InferenceService inference_;
  HealthService health_;
  std::unique_ptr<grpc::Server> server_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // StopAccepting was called
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;   // gRPC's Shutdown returned
  std::thread stopper_;                         // runs gRPC's Shutdown
};

GrpcServer::GrpcServer(std::unique_ptr<Impl> impl, int port)
    : impl_(std::move(impl)), port_(port) {}

GrpcServer::~GrpcServer() {
  Shutdown(absl::ZeroDuration());
  if (impl_->stopper_.joinable()) impl_->stopper_.join();
}

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
  auto impl = std::make_unique<Impl>(engine, options.api_key);
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

void GrpcServer::RefreshHealth() { impl_->health_.Refresh(); }

void GrpcServer::StopAccepting(absl::Duration grace) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu_);
    if (impl_->stopping_) return;
    impl_->stopping_ = true;
  }
  // Idle streams and health watches would otherwise hold the shutdown until
  // its deadline.
  impl_->inference_.EndStreams();
  impl_->health_.EndAll();
  const auto deadline = std::chrono::system_clock::now() +
                        absl::ToChronoNanoseconds(std::max(grace, absl::ZeroDuration()));
  Impl* impl = impl_.get();
  impl_->stopper_ = std::thread([impl, deadline] {
    impl->server_->Shutdown(deadline);
    impl->server_->Wait();
    std::lock_guard<std::mutex> lock(impl->mu_);
    impl->stopped_ = true;
    impl->cv_.notify_all();
  });
}

bool GrpcServer::WaitStopped(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(impl_->mu_);
  return impl_->cv_.wait_for(lock,
                             absl::ToChronoNanoseconds(std::max(timeout, absl::ZeroDuration())),
                             [this] { return impl_->stopped_; });
}

void GrpcServer::Shutdown(absl::Duration grace) {
  StopAccepting(grace);
  std::unique_lock<std::mutex> lock(impl_->mu_);
  impl_->cv_.wait(lock, [this] { return impl_->stopped_; });
}

}  // namespace infer
