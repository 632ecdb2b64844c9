// JSON for the REST front ends (nlohmann::json): protobuf messages printed
// the way Triton's HTTP endpoints print them, and the mapping from the
// engine's status codes to HTTP statuses.
#ifndef INFER_SERVER_HTTP_HTTP_JSON_H_
#define INFER_SERVER_HTTP_HTTP_JSON_H_

#include <google/protobuf/message.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace infer {

// `message` as JSON with the proto field names, every field present (scalars
// at their defaults, repeated fields as arrays, maps as objects, message
// fields when set, the set member of a oneof), 64-bit integers as JSON
// numbers (Triton's clients read dims and counts as numbers, where
// protobuf's own JSON printer writes strings), enums by name.
nlohmann::json ProtoToJson(const google::protobuf::Message& message);

// The HTTP status for an error code. Triton's mapping where Triton has the
// code (INVALID_ARGUMENT and the other caller errors 400, NOT_FOUND 404,
// UNAVAILABLE 503, UNIMPLEMENTED 501, INTERNAL 500), and google.rpc's where
// it does not (RESOURCE_EXHAUSTED 429, DEADLINE_EXCEEDED 504). 200 for OK.
int HttpStatusFor(absl::StatusCode code);

// Appends `values` as a JSON array of numbers, each float in its shortest
// form that reads back to the same float (std::to_chars), where a float
// widened to double would print 17 digits. NaN and infinities, which JSON
// lacks, are written null (as nlohmann::json writes them).
void AppendJsonFloats(const float* values, size_t n, std::string* out);
// One such number.
void AppendJsonFloat(float value, std::string* out);
// A string as a JSON string literal (quoted, escaped; invalid UTF-8
// replaced).
std::string JsonString(const std::string& s);

// A JSON value dumped for a response body: invalid UTF-8 in strings is
// replaced (U+FFFD) instead of failing.
std::string DumpJson(const nlohmann::json& value);

// Body fields as TEI's and Cohere's JSON have them (absent or null: the
// default), INVALID_ARGUMENT naming the field when of another type:
// a bool, or `otherwise`;
absl::StatusOr<bool> BoolField(const nlohmann::json& doc, const char* key, bool otherwise);
// a string, or empty;
absl::StatusOr<std::string> StringField(const nlohmann::json& doc, const char* key);
// "truncate" (a bool, left unset when absent) and "truncation_direction"
// ("left" or "right", either with a capital; `*left` false when absent).
absl::Status TruncationFields(const nlohmann::json& doc, std::optional<bool>* truncate, bool* left);

}  // namespace infer

#endif  // INFER_SERVER_HTTP_HTTP_JSON_H_
