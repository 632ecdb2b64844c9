// grpc.health.v1.Health over an Engine: Check, and Watch for clients that
// balance on health themselves (gRPC's client-side health checking:
// "healthCheckConfig" in a channel's service config).
//
// - The status is SERVING while Engine::Ready(), else NOT_SERVING: it turns
//   NOT_SERVING when a drain begins (Engine::BeginDrain), Shutdown begins or
//   the device is lost. Services: "" (the whole server) and
//   "inference.GRPCInferenceService"; Check names any other NOT_FOUND, Watch
//   answers SERVICE_UNKNOWN (as the protocol asks) and stays open.
// - Watch sends the status at once and then each change. Changes are pushed
//   by Refresh(), which the owner calls after anything that changes
//   Engine::Ready(); a watcher that is still writing gets the latest status
//   when its write completes (intermediate ones are skipped, as the protocol
//   allows).
// - EndAll() finishes every watch (OK) and each one opened after it at once:
//   the server calls it before gRPC's Shutdown, which would otherwise wait
//   for the watches until its deadline. A client then counts the server
//   unhealthy until a new watch says SERVING.
//
// Thread-safe.
#ifndef INFER_SERVER_GRPC_HEALTH_SERVICE_H_
#define INFER_SERVER_GRPC_HEALTH_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "engine/engine.h"
#include "health.grpc.pb.h"
#include "server/grpc/open_calls.h"

namespace infer {

class HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  // `engine` is borrowed and outlives the service.
  explicit HealthService(Engine* engine) : engine_(engine) {}

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* ctx,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* ctx,
      const grpc::health::v1::HealthCheckRequest* request) override;

  // Sends the current status to every watcher whose last one differs.
  void Refresh();
  // Ends every watch (see above). Idempotent.
  void EndAll();

 private:
  class Watcher;
  grpc::health::v1::HealthCheckResponse::ServingStatus Status() const;

  Engine* const engine_;
  OpenCalls<Watcher> watchers_;
};

}  // namespace infer

#endif  // INFER_SERVER_GRPC_HEALTH_SERVICE_H_
