#include "runtime/tensor.h"

#include <array>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace infer {
namespace {

struct TypeInfo {
  DataType dtype;
  absl::string_view name;
  int64_t size;
};

constexpr std::array<TypeInfo, 14> kTypes = {{
    {DataType::kBool, "BOOL", 1},
    {DataType::kUint8, "UINT8", 1},
    {DataType::kUint16, "UINT16", 2},
    {DataType::kUint32, "UINT32", 4},
    {DataType::kUint64, "UINT64", 8},
    {DataType::kInt8, "INT8", 1},
    {DataType::kInt16, "INT16", 2},
    {DataType::kInt32, "INT32", 4},
    {DataType::kInt64, "INT64", 8},
    {DataType::kFp16, "FP16", 2},
    {DataType::kBf16, "BF16", 2},
    {DataType::kFp32, "FP32", 4},
    {DataType::kFp64, "FP64", 8},
    {DataType::kBytes, "BYTES", 0},
}};

const TypeInfo& Info(DataType dtype) {
  for (const TypeInfo& t : kTypes) {
    if (t.dtype == dtype) return t;
  }
  return kTypes.back();  // unreachable: every enumerator is listed
}

}  // namespace

absl::string_view DataTypeName(DataType dtype) { return Info(dtype).name; }

std::optional<DataType> DataTypeFromName(absl::string_view name) {
  for (const TypeInfo& t : kTypes) {
    if (t.name == name) return t.dtype;
  }
  return std::nullopt;
}

int64_t DataTypeSize(DataType dtype) { return Info(dtype).size; }

absl::StatusOr<int64_t> ElementCount(absl::Span<const int64_t> shape, absl::string_view what) {
  bool has_zero = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, " has negative dimension ", shape[i],
                                                     " at index ", i, " of shape ",
                                                     ShapeToString(shape)));
    }
    has_zero |= shape[i] == 0;
  }
  if (has_zero) return 0;  // however large the other dimensions are
  int64_t count = 1;
  for (const int64_t dim : shape) {
    if (count > std::numeric_limits<int64_t>::max() / dim) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " shape ", ShapeToString(shape), " overflows a 64-bit element count"));
    }
    count *= dim;
  }
  return count;
}

absl::StatusOr<int64_t> ByteSize(DataType dtype, absl::Span<const int64_t> shape,
                                 absl::string_view what) {
  absl::StatusOr<int64_t> count = ElementCount(shape, what);
  if (!count.ok()) return count.status();
  const int64_t size = DataTypeSize(dtype);
  if (size > 0 && *count > std::numeric_limits<int64_t>::max() / size) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " shape ", ShapeToString(shape), " overflows a 64-bit byte size"));
  }
  return *count * size;
}

std::string ShapeToString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

}  // namespace infer
