// The checks a KServe v2 inference input passes whatever carried it: gRPC's
// ModelInferRequest (server/kserve/proto_codec.h) or KServe REST's JSON with
// Triton's binary data (server/http/rest_request.h). Both front ends call
// these, so they refuse the same request in the same words. No protobuf.
//
// Thread-safe (pure functions).
#ifndef INFER_SERVER_KSERVE_INPUT_CHECKS_H_
#define INFER_SERVER_KSERVE_INPUT_CHECKS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "models/model.h"
#include "runtime/tensor.h"

namespace infer {

// `what` names the input in messages: "input 'name'" (Quote).

// The datatype a KServe name ("FP32", "BYTES", ...) stands for;
// INVALID_ARGUMENT listing the KServe datatypes otherwise.
absl::StatusOr<DataType> InputDataType(absl::string_view datatype, absl::string_view what);

// The raw bytes of an input of a fixed-size datatype (not BYTES) against
// what its shape and datatype need. INVALID_ARGUMENT naming both.
absl::Status CheckRawInputSize(DataType dtype, absl::Span<const int64_t> shape, size_t bytes,
                               absl::string_view what);

// Triton's scheduling parameters: "priority" (1 the most urgent) and
// "timeout" (microseconds). Others are ignored, as Triton ignores them.
bool IsSchedulingParameter(absl::string_view key);
// Sets the scheduling parameter `key` to `value`; INVALID_ARGUMENT when it
// is negative.
absl::Status ApplySchedulingParameter(absl::string_view key, int64_t value, InferRequest* request);
// The INVALID_ARGUMENT for a scheduling parameter whose value is not an
// integer that fits int64.
absl::Status SchedulingParameterNotAnInteger(absl::string_view key);

// The text and embedding parameters, as TEI names them, for a model that
// tokenises text or gives embeddings (InferRequest's truncate, prompt_name,
// normalize, dimensions): "truncate" (a bool), "truncation_direction"
// ("left" or "right"), "prompt_name" (a string), "normalize" (a bool) and
// "dimensions" (an integer).
bool IsTextParameter(absl::string_view key);
// Sets the text parameter `key` from a bool (`flag`), a string (`text`) or
// an integer (`number`), whichever the parameter held (the others null);
// INVALID_ARGUMENT naming what the parameter takes otherwise. The model
// judges the values (CheckRequestOptions).
absl::Status ApplyTextParameter(absl::string_view key, const bool* flag, const std::string* text,
                                const int64_t* number, InferRequest* request);

}  // namespace infer

#endif  // INFER_SERVER_KSERVE_INPUT_CHECKS_H_
