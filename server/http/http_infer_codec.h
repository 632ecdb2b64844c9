// KServe v2 REST tensors in JSON, both ways: an input's JSON "data" as the
// engine's tensor bytes (for RestRequestSource, server/http/rest_request.h),
// and an inference response as KServe REST's JSON with Triton's binary
// tensor data extension.
//
// JSON "data" may be flat or nested row-major; its values must match the
// datatype (integers in range for integer types, numbers for floats, true or
// false for BOOL, strings for BYTES); FP16 and BF16 must be sent as binary.
// Errors are INVALID_ARGUMENT naming the input and what was expected.
// Nothing is allocated in proportion to a declared shape: the values are
// counted against the shape before they are converted.
#ifndef INFER_SERVER_HTTP_HTTP_INFER_CODEC_H_
#define INFER_SERVER_HTTP_HTTP_INFER_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "models/model.h"
#include "runtime/tensor.h"

namespace infer {

// `data` (an input's JSON "data") as the bytes of a tensor of `dtype` and
// `shape`, appended to *out (BYTES in the 4-byte-length layout). `what`
// names the input.
absl::Status JsonDataToTensorBytes(const nlohmann::json& data, DataType dtype,
                                   absl::Span<const int64_t> shape, const std::string& what,
                                   std::string* out);

// The bytes a BYTES input's JSON "data" takes in the 4-byte-length layout
// (its string values; other values and nesting past the data depth limit
// are not counted: converting them fails).
int64_t JsonTextBytes(const nlohmann::json& data);

// Which outputs an answer sends as binary data: by name (an output's
// parameters.binary_data), and `all_binary` for outputs the request did not
// list (its "binary_data_output" parameter).
struct RestOutputChoices {
  std::vector<std::pair<std::string, bool>> binary_outputs;
  bool all_binary = false;
};

struct RestBody {
  std::string body;
  std::string content_type;
  size_t json_length = 0;  // the Inference-Header-Content-Length, when binary
  bool binary = false;
};

// The response's JSON, followed by the binary outputs when any output is
// sent as binary (FP16 and BF16 always are: JSON cannot carry them).
RestBody EncodeRestInferResponse(const InferResponse& response, const RestOutputChoices& choices);

}  // namespace infer

#endif  // INFER_SERVER_HTTP_HTTP_INFER_CODEC_H_
