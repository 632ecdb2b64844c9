// GrpcServer: the KServe v2 gRPC front end (inference.GRPCInferenceService)
// plus grpc.health.v1.Health (server/grpc/health_service.h), over an Engine. Built on gRPC's
// callback API: no thread is held per request; ModelInfer answers from the engine's completion
// callback.
//
// Ownership: the Engine is borrowed and must outlive the server.
// Thread-safe.
#ifndef INFER_SERVER_GRPC_GRPC_SERVER_H_
#define INFER_SERVER_GRPC_GRPC_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/engine.h"
#include "server/api_key.h"

namespace infer {

struct GrpcServerOptions {
  // host:port to listen on; port 0 picks a free port (see GrpcServer::port).
  std::string address = "127.0.0.1:8001";
  // Largest request message accepted; larger ones get RESOURCE_EXHAUSTED
  // from gRPC before they are read into memory.
  int64_t max_receive_message_bytes = 64 << 20;
  // TLS: PEM files of the server's certificate chain and private key. Both
  // empty: plaintext. With a client CA bundle as well, clients must present
  // a certificate it signed (mutual TLS); others fail the handshake.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  // With a key (not null, enabled; borrowed, outlives the server): every
  // call but the health checks (grpc.health.v1, ServerLive, ServerReady)
  // must carry the metadata `authorization: Bearer KEY`, else it ends
  // UNAUTHENTICATED before anything is looked up (server/api_key.h).
  const ApiKey* api_key = nullptr;
};

class GrpcServer {
 public:
  // Starts serving. UNAVAILABLE naming the address when it cannot listen;
  // INVALID_ARGUMENT or NOT_FOUND naming the file for bad TLS settings.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(const GrpcServerOptions& options,
                                                           Engine* engine);
  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // The port actually bound.
  int port() const { return port_; }

  // Sends the health status to the health watchers (Health.Watch) if it
  // changed: call after anything that changes Engine::Ready() (a drain
  // begins, the device is lost).
  void RefreshHealth();

  // Stops accepting RPCs (gRPC's Shutdown: GOAWAY to every connection, the
  // listener closed), ends the health watches and the open ModelStreamInfer
  // streams (each once what it read is answered: UNAVAILABLE, "open a new
  // stream"), and lets in-flight RPCs finish for up to `grace`, then
  // cancels the rest. Returns at once; gRPC's Shutdown runs on a thread of
  // its own. Idempotent.
  void StopAccepting(absl::Duration grace);
  // Waits up to `timeout` for that Shutdown to return: every call done and
  // every connection closed. gRPC also waits for clients to close their
  // idle connections after GOAWAY, which some take seconds to do (or, after
  // some refused calls, until the deadline), so a caller that knows every
  // call was answered may stop waiting before then.
  bool WaitStopped(absl::Duration timeout);
  // StopAccepting(grace), then waits until gRPC's Shutdown returns.
  void Shutdown(absl::Duration grace);

 private:
  class Impl;
  explicit GrpcServer(std::unique_ptr<Impl> impl, int port);

  std::unique_ptr<Impl> impl_;
  const int port_;
};

}  // namespace infer

#endif  // INFER_SERVER_GRPC_GRPC_SERVER_H_
