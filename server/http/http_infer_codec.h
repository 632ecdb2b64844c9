// The KServe v2 REST inference request and response (JSON, with Triton's
// binary tensor data extension) to and from the gRPC messages, so that a
// REST request then goes through exactly the gRPC path's decoding, limits
// and error texts (ProtoRequestSource, server/kserve/proto_request.h).
//
// Request body: a JSON object {"id", "parameters", "inputs": [{"name",
// "shape", "datatype", "data" | "parameters": {"binary_data_size": n}}],
// "outputs": [{"name", "parameters": {"binary_data": bool}}]}. When the
// Inference-Header-Content-Length header is given, the JSON is that many
// bytes and the inputs' binary data follow it, in input order, each
// binary_data_size bytes (BYTES in the 4-byte-length layout).
// JSON "data" may be flat or nested row-major; its values must match the
// datatype (integers in range for integer types, numbers for floats, true or
// false for BOOL, strings for BYTES); FP16 and BF16 must be sent as binary.
//
// Errors are INVALID_ARGUMENT naming the field, the input, and what was
// expected. Nothing is allocated in proportion to a declared shape: JSON
// values are counted against the shape before they are converted, and
// binary sizes are checked against the bytes received.
#ifndef INFER_SERVER_HTTP_HTTP_INFER_CODEC_H_
#define INFER_SERVER_HTTP_HTTP_INFER_CODEC_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/request_source.h"
#include "grpc_service.pb.h"
#include "models/model.h"
#include "server/http/http_server.h"
#include "server/kserve/proto_request.h"

namespace infer {

struct RestInferRequest {
  inference::ModelInferRequest proto;
  // Which outputs to send as binary data, by name; `all_binary` for outputs
  // the request did not list (its "binary_data_output" parameter).
  std::vector<std::pair<std::string, bool>> binary_outputs;
  bool all_binary = false;
};

// `json_length`: the Inference-Header-Content-Length header's value, or
// empty when absent (the whole body is JSON).
absl::StatusOr<RestInferRequest> ParseRestInferRequest(const std::string& model,
                                                       const std::string& version, std::string body,
                                                       absl::string_view json_length);

// A KServe v2 REST inference request as the engine's request source
// (engine/request_source.h): the body is parsed (ParseRestInferRequest)
// when the engine asks what it declares, so a body it cannot read is
// counted against the model, then handled as a gRPC request is
// (ProtoRequestSource, server/kserve/proto_request.h).
class RestRequestSource final : public RequestSource {
 public:
  // All borrowed, and outlive the source. `request`'s body is moved out; the
  // parsed request goes to *parsed, whose output choices the answer needs
  // (its message is cleared once decoded).
  RestRequestSource(const std::string& model, const std::string& version, HttpRequest* request,
                    RestInferRequest* parsed)
      : model_(model), version_(version), request_(request), parsed_(parsed) {}
  const std::string& model_name() const override { return model_; }
  absl::Status Declare(const ModelSpec& spec, DeclaredRequest* declared) override;
  absl::Status Decode(const ModelSpec& spec, InferRequest* request) override;

 private:
  const std::string& model_;
  const std::string& version_;
  HttpRequest* const request_;
  RestInferRequest* const parsed_;
  std::optional<ProtoRequestSource> proto_;
};

struct RestBody {
  std::string body;
  std::string content_type;
  size_t json_length = 0;  // the Inference-Header-Content-Length, when binary
  bool binary = false;
};

// The response's JSON, followed by the binary outputs when any output is
// sent as binary.
RestBody EncodeRestInferResponse(const InferResponse& response, const RestInferRequest& request);

}  // namespace infer

#endif  // INFER_SERVER_HTTP_HTTP_INFER_CODEC_H_
