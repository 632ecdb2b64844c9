#include "server/kserve/input_checks.h"

#include "absl/strings/str_cat.h"
#include "runtime/quote.h"
#include "runtime/status_macros.h"

namespace infer {

absl::StatusOr<DataType> InputDataType(absl::string_view datatype, absl::string_view what) {
  std::optional<DataType> dtype = DataTypeFromName(datatype);
  if (dtype) return *dtype;
  return absl::InvalidArgumentError(
      absl::StrCat(what, " has unknown datatype ", Quote(datatype),
                   "; KServe v2 datatypes are BOOL, UINT8, UINT16, UINT32, UINT64, INT8, "
                   "INT16, INT32, INT64, FP16, BF16, FP32, FP64, BYTES"));
}

absl::Status CheckRawInputSize(DataType dtype, absl::Span<const int64_t> shape, size_t bytes,
                               absl::string_view what) {
  INFER_ASSIGN_OR_RETURN(const int64_t need, ByteSize(dtype, shape, what));
  if (static_cast<int64_t>(bytes) == need) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " has ", bytes, " bytes in raw_input_contents; its shape ",
                   ShapeToString(shape), " and datatype ", DataTypeName(dtype), " need ", need));
}

bool IsSchedulingParameter(absl::string_view key) { return key == "priority" || key == "timeout"; }

absl::Status ApplySchedulingParameter(absl::string_view key, int64_t value, InferRequest* request) {
  if (value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter '", key, "' must not be negative, got ", value));
  }
  if (key == "priority") {
    request->priority = value;
  } else if (key == "timeout") {
    request->timeout = absl::Microseconds(value);  // Triton: microseconds
  }
  return absl::OkStatus();
}

absl::Status SchedulingParameterNotAnInteger(absl::string_view key) {
  return absl::InvalidArgumentError(
      absl::StrCat("parameter '", key, "' must be an int64 or uint64"));
}

bool IsTextParameter(absl::string_view key) {
  return key == "truncate" || key == "truncation_direction" || key == "prompt_name" ||
         key == "normalize" || key == "dimensions";
}

absl::Status ApplyTextParameter(absl::string_view key, const bool* flag, const std::string* text,
                                const int64_t* number, InferRequest* request) {
  if (key == "truncate" || key == "normalize") {
    if (flag == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", key, "' must be a bool"));
    }
    (key == "truncate" ? request->truncate : request->normalize) = *flag;
    return absl::OkStatus();
  }
  if (key == "dimensions") {
    if (number == nullptr || *number < 1) {
      return absl::InvalidArgumentError("parameter 'dimensions' must be a positive integer");
    }
    request->dimensions = *number;
    return absl::OkStatus();
  }
  if (key == "prompt_name") {
    if (text == nullptr) {
      return absl::InvalidArgumentError("parameter 'prompt_name' must be a string");
    }
    request->prompt_name = *text;
    return absl::OkStatus();
  }
  if (text == nullptr || (*text != "left" && *text != "right")) {
    return absl::InvalidArgumentError(
        "parameter 'truncation_direction' must be the string \"left\" or \"right\"");
  }
  request->truncate_left = *text == "left";
  return absl::OkStatus();
}

}  // namespace infer
