// A KServe v2 REST inference request (POST /v2/models/{m}[/versions/{v}]/infer)
// as the engine's request source (engine/request_source.h), decoded straight
// into the engine's request, with no protobuf in between.
//
// Body: a JSON object {"id", "parameters", "inputs": [{"name", "shape",
// "datatype", "data" | "parameters": {"binary_data_size": n}}], "outputs":
// [{"name", "parameters": {"binary_data": bool}}]}. When the
// Inference-Header-Content-Length header is given, the JSON is that many
// bytes and the inputs' binary data follow it, in input order, each
// binary_data_size bytes (BYTES in the 4-byte-length layout).
//
// Declare parses the JSON (depth-bounded, runtime/json_parse.h), checks the
// request's structure, the version and each binary size against the bytes
// received, and declares the inputs' shapes and text bytes; nothing is
// converted yet. Decode converts the values (JSON "data" through
// http_infer_codec.h, binary data checked against shape and datatype) with
// the checks and words gRPC's decoding uses (server/kserve/input_checks.h).
// Errors are INVALID_ARGUMENT naming the field, the input and what was
// expected; an unknown version is NOT_FOUND.
#ifndef INFER_SERVER_HTTP_REST_REQUEST_H_
#define INFER_SERVER_HTTP_REST_REQUEST_H_

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "engine/request_source.h"
#include "models/model.h"
#include "server/http/http_infer_codec.h"
#include "server/http/http_server.h"

namespace infer {

class RestRequestSource final : public RequestSource {
 public:
  // `request` is borrowed (its body is moved out in Declare); the output
  // choices go to *choices, which the answer reads.
  RestRequestSource(std::string model, std::string version, HttpRequest* request,
                    RestOutputChoices* choices)
      : model_(std::move(model)),
        version_(std::move(version)),
        request_(request),
        choices_(choices) {}
  const std::string& model_name() const override { return model_; }
  absl::Status Declare(const ModelSpec& spec, DeclaredRequest* declared) override;
  absl::Status Decode(const ModelSpec& spec, InferRequest* request) override;

 private:
  // One input as the JSON declares it; its values are either JSON `data`
  // (a view into doc_) or binary_data_size bytes of body_ at `offset`.
  struct Input {
    std::string name;
    std::string datatype;
    std::vector<int64_t> shape;
    const nlohmann::json* data = nullptr;
    size_t offset = 0;
    size_t size = 0;
  };

  const std::string model_;
  const std::string version_;
  HttpRequest* const request_;
  RestOutputChoices* const choices_;
  // From Declare, for Decode.
  std::string body_;
  nlohmann::json doc_;
  std::string id_;
  std::vector<Input> inputs_;
  std::vector<std::string> outputs_;
  std::vector<std::pair<std::string, int64_t>> scheduling_;  // Triton's parameters
  InferRequest text_;  // only its text parameters (ApplyTextParameter) are set
};

}  // namespace infer

#endif  // INFER_SERVER_HTTP_REST_REQUEST_H_
