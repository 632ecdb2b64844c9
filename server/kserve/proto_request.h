// A KServe v2 ModelInferRequest as the engine's request source
// (engine/request_source.h): the gRPC front end's, unary and streaming
// (KServe REST has its own, server/http/rest_request.h). Declare checks the
// model version and declares the inputs' shapes and text bytes from the
// message, before any contents are copied (typed contents can be a few
// times larger decoded than on the wire); Decode is RequestFromProto
// (server/kserve/proto_codec.h), which moves the raw payloads out.
#ifndef INFER_SERVER_KSERVE_PROTO_REQUEST_H_
#define INFER_SERVER_KSERVE_PROTO_REQUEST_H_

#include <functional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/request_source.h"
#include "grpc_service.pb.h"

namespace infer {

// Every model has one version, "1".
inline constexpr char kModelVersion[] = "1";

// OK for "1" and for "" (the latest); NOT_FOUND naming the versions else.
absl::Status CheckVersion(const std::string& model, const std::string& version);

class ProtoRequestSource final : public RequestSource {
 public:
  // Borrowed; it outlives the source. Decode moves its raw payloads out.
  explicit ProtoRequestSource(inference::ModelInferRequest* request) : request_(request) {}

  // What the transport knows of the call, given to the decoded request.
  void set_deadline(absl::Time deadline) { deadline_ = deadline; }
  void set_is_cancelled(std::function<bool()> is_cancelled) {
    is_cancelled_ = std::move(is_cancelled);
  }

  const std::string& model_name() const override { return request_->model_name(); }
  absl::Status Declare(const ModelSpec& spec, DeclaredRequest* declared) override;
  absl::Status Decode(const ModelSpec& spec, InferRequest* request) override;

 private:
  inference::ModelInferRequest* const request_;
  absl::Time deadline_ = absl::InfiniteFuture();
  std::function<bool()> is_cancelled_;
};

}  // namespace infer

#endif  // INFER_SERVER_KSERVE_PROTO_REQUEST_H_
