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

void AppendBytesElement(absl::string_view element, std::string* data) {
  const uint32_t n = static_cast<uint32_t>(element.size());
  const char len[4] = {static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
                       static_cast<char>((n >> 16) & 0xff), static_cast<char>((n >> 24) & 0xff)};
  data->append(len, 4);
  data->append(element.data(), element.size());
}

absl::StatusOr<std::vector<absl::string_view>> BytesElements(const Tensor& t, int64_t count,
                                                             absl::string_view what) {
  std::vector<absl::string_view> out;
  size_t offset = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (t.data.size() - offset < 4) {
      return absl::InvalidArgumentError(absl::StrCat(what, " holds ", i,
                                                     " BYTES elements; its shape ",
                                                     ShapeToString(t.shape), " needs ", count));
    }
    uint32_t len = 0;
    for (int b = 3; b >= 0; --b) {
      len = (len << 8) | static_cast<unsigned char>(t.data[offset + b]);
    }
    offset += 4;
    if (t.data.size() - offset < len) {
      return absl::InvalidArgumentError(absl::StrCat(what, " element ", i, " declares ", len,
                                                     " bytes but only ", t.data.size() - offset,
                                                     " remain"));
    }
    out.emplace_back(t.data.data() + offset, len);
    offset += len;
  }
  if (offset != t.data.size()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has ", t.data.size() - offset,
                                                   " bytes after its ", count, " BYTES elements"));
  }
  return out;
}

std::string ShapeToString(absl::Span<const int64_t> shape) {
  if (shape.size() <= kShapeToStringDims) return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
  return absl::StrCat("[", absl::StrJoin(shape.subspan(0, kShapeToStringDims), ","), ",…] (rank ",
                      shape.size(), ")");
}

}  // namespace infer
