// The gRPC front end's part of a ModelInfer request before it reaches the
// engine, shared by the unary and the streaming call: the model version, the
// request limits on the declared shapes (checked on the protobuf before any
// contents are copied), then decoding into an InferRequest (the first step of
// the one admission pass, server/request_admission.h).
#ifndef INFER_SERVER_GRPC_DECODE_H_
#define INFER_SERVER_GRPC_DECODE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpc_service.pb.h"
#include "server/engine.h"

namespace infer {

// Every model has one version, "1".
inline constexpr char kModelVersion[] = "1";

// OK for "1" and for "" (the latest); NOT_FOUND naming the versions else.
absl::Status CheckVersion(const std::string& model, const std::string& version);

// Version, declared limits, then RequestFromProto, which moves the raw
// payloads out of `req`. A refusal is counted in the model's statistics when
// the model is loaded; an unknown model passes (the engine names it).
absl::StatusOr<InferRequest> DecodeInferRequest(Engine& engine, inference::ModelInferRequest* req);

}  // namespace infer

#endif  // INFER_SERVER_GRPC_DECODE_H_
