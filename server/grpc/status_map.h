// The one place where internal absl::Status becomes a grpc::Status. Abseil
// and gRPC share the canonical code numbering, so the code maps one to one;
// the message is kept verbatim up to kMaxStatusMessageBytes (a status
// message travels in a header, which clients refuse past 16 KiB).
#ifndef INFER_SERVER_GRPC_STATUS_MAP_H_
#define INFER_SERVER_GRPC_STATUS_MAP_H_

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"
#include "runtime/quote.h"

namespace infer {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      BoundedMessage(status.message()));
}

}  // namespace infer

#endif  // INFER_SERVER_GRPC_STATUS_MAP_H_
