// Host tensors and data types shared by every layer (no gRPC, no CUDA).
//
// A Tensor owns its bytes in a std::string so that payloads received from the
// network can be moved in without a copy. BYTES tensors use the KServe v2 raw
// layout: each element is a 4-byte little-endian length followed by its bytes.
//
// Immutable value types; not synchronized.
#ifndef INFER_RUNTIME_TENSOR_H_
#define INFER_RUNTIME_TENSOR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace infer {

enum class DataType {
  kBool,
  kUint8,
  kUint16,
  kUint32,
  kUint64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFp16,
  kBf16,
  kFp32,
  kFp64,
  kBytes,
};

// The KServe v2 name ("INT64", "FP32", "BYTES", ...).
absl::string_view DataTypeName(DataType dtype);
// Parses a KServe v2 name; nullopt when unknown.
std::optional<DataType> DataTypeFromName(absl::string_view name);
// Bytes per element; 0 for BYTES (variable size).
int64_t DataTypeSize(DataType dtype);

// Product of `shape` with overflow and sign checks. Errors are
// INVALID_ARGUMENT naming `what` (e.g. "input 'input_ids'").
absl::StatusOr<int64_t> ElementCount(absl::Span<const int64_t> shape, absl::string_view what);
// ElementCount(shape) * DataTypeSize(dtype), overflow-checked. Fixed-size
// types only.
absl::StatusOr<int64_t> ByteSize(DataType dtype, absl::Span<const int64_t> shape,
                                 absl::string_view what);

// "[2,128]". A shape comes from the client, so a message must not grow with
// its rank: past kShapeToStringDims dimensions, "[d0,...,d7,…] (rank N)".
inline constexpr size_t kShapeToStringDims = 8;
std::string ShapeToString(absl::Span<const int64_t> shape);

// BYTES layout helpers (4-byte little-endian length, then the bytes).
void AppendBytesElement(absl::string_view element, std::string* data);

struct Tensor;
// The elements of a BYTES tensor, in order (views into t.data).
// INVALID_ARGUMENT naming `what` when the layout is broken or does not hold
// exactly `count` elements.
absl::StatusOr<std::vector<absl::string_view>> BytesElements(const Tensor& t, int64_t count,
                                                             absl::string_view what);

struct Tensor {
  std::string name;
  DataType dtype = DataType::kFp32;
  std::vector<int64_t> shape;
  std::string data;  // row-major bytes, exactly ByteSize(dtype, shape)

  template <typename T>
  const T* as() const {
    return reinterpret_cast<const T*>(data.data());
  }
  template <typename T>
  T* mutable_as() {
    return reinterpret_cast<T*>(data.data());
  }
};

}  // namespace infer

#endif  // INFER_RUNTIME_TENSOR_H_
