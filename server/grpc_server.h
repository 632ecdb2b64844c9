// GrpcServer: the KServe v2 gRPC front end (inference.GRPCInferenceService)
// plus grpc.health.v1.Health, over an Engine. Built on gRPC's callback API:
// no thread is held per request; ModelInfer answers from the engine's
// completion callback.
//
// Ownership: the Engine is borrowed and must outlive the server.
// Thread-safe.
#ifndef INFER_SERVER_GRPC_SERVER_H_
#define INFER_SERVER_GRPC_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/engine.h"

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

  // Stops accepting RPCs, lets in-flight RPCs finish for up to `grace`, then
  // cancels the rest. Idempotent.
  void Shutdown(absl::Duration grace);

 private:
  class Impl;
  explicit GrpcServer(std::unique_ptr<Impl> impl, int port);

  std::unique_ptr<Impl> impl_;
  const int port_;
};

}  // namespace infer

#endif  // INFER_SERVER_GRPC_SERVER_H_
