#include "engine/request_split.h"

#include "absl/strings/str_cat.h"
#include "runtime/status_macros.h"

namespace infer {
namespace {

// Byte offset of each row boundary of `t` (rows + 1 offsets).
absl::StatusOr<std::vector<size_t>> RowOffsets(const Tensor& t) {
  const int64_t rows = t.shape.empty() ? 1 : t.shape[0];
  std::vector<int64_t> row_shape(t.shape.begin() + (t.shape.empty() ? 0 : 1), t.shape.end());
  INFER_ASSIGN_OR_RETURN(const int64_t per_row, ElementCount(row_shape, t.name));
  std::vector<size_t> offsets = {0};
  if (t.dtype != DataType::kBytes) {
    const size_t row_bytes = static_cast<size_t>(per_row * DataTypeSize(t.dtype));
    for (int64_t r = 1; r <= rows; ++r) offsets.push_back(r * row_bytes);
    return offsets;
  }
  // BYTES: a row ends where its last element's bytes end.
  INFER_ASSIGN_OR_RETURN(const std::vector<absl::string_view> elements,
                         BytesElements(t, rows * per_row, t.name));
  for (int64_t r = 1; r <= rows; ++r) {
    if (per_row == 0) {
      offsets.push_back(offsets.back());
      continue;
    }
    const absl::string_view last = elements[r * per_row - 1];
    offsets.push_back(static_cast<size_t>(last.data() + last.size() - t.data.data()));
  }
  return offsets;
}

}  // namespace

absl::StatusOr<std::vector<InferRequest>> SplitRequest(const InferRequest& request,
                                                       int64_t max_rows) {
  const int64_t rows = RequestBatchSize(request);
  std::vector<InferRequest> pieces;
  for (int64_t begin = 0; begin < rows; begin += max_rows) {
    const int64_t end = std::min(rows, begin + max_rows);
    InferRequest piece;
    piece.model_name = request.model_name;
    piece.id = request.id;
    piece.requested_outputs = request.requested_outputs;
    piece.priority = request.priority;
    piece.deadline = request.deadline;
    piece.timeout = request.timeout;
    piece.is_cancelled = request.is_cancelled;
    piece.truncate = request.truncate;
    piece.truncate_left = request.truncate_left;
    piece.prompt_name = request.prompt_name;
    piece.normalize = request.normalize;
    piece.dimensions = request.dimensions;
    for (const Tensor& t : request.inputs) {
      INFER_ASSIGN_OR_RETURN(const std::vector<size_t> offsets, RowOffsets(t));
      Tensor part;
      part.name = t.name;
      part.dtype = t.dtype;
      part.shape = t.shape;
      part.shape[0] = end - begin;
      part.data.assign(t.data, offsets[begin], offsets[end] - offsets[begin]);
      piece.inputs.push_back(std::move(part));
    }
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

absl::StatusOr<InferResponse> JoinResponses(std::vector<InferResponse> parts) {
  if (parts.empty()) return absl::InternalError("no pieces to join");
  InferResponse joined = std::move(parts[0]);
  for (size_t p = 1; p < parts.size(); ++p) {
    if (parts[p].outputs.size() != joined.outputs.size()) {
      return absl::InternalError("split pieces returned different outputs");
    }
    for (size_t o = 0; o < joined.outputs.size(); ++o) {
      Tensor& into = joined.outputs[o];
      const Tensor& from = parts[p].outputs[o];
      if (from.name != into.name || from.dtype != into.dtype || from.shape.empty() ||
          from.shape.size() != into.shape.size()) {
        return absl::InternalError(
            absl::StrCat("split pieces disagree on output '", into.name, "'"));
      }
      into.shape[0] += from.shape[0];
      into.data += from.data;
    }
  }
  return joined;
}

}  // namespace infer
