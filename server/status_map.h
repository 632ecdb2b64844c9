// The one place where internal absl::Status becomes a grpc::Status. Abseil
// and gRPC share the canonical code numbering, so the code maps one to one
// and the message is kept verbatim.
#ifndef INFER_SERVER_STATUS_MAP_H_
#define INFER_SERVER_STATUS_MAP_H_

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"

namespace infer {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

}  // namespace infer

#endif  // INFER_SERVER_STATUS_MAP_H_
