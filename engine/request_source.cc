#include "engine/request_source.h"

namespace infer {

absl::Status InferRequestSource::Declare(const ModelSpec&, DeclaredRequest* declared) {
  for (const Tensor& t : request_.inputs) {
    declared->inputs.push_back({t.name, t.shape});
    if (t.dtype == DataType::kBytes) declared->text_bytes += static_cast<int64_t>(t.data.size());
  }
  return absl::OkStatus();
}

absl::Status InferRequestSource::Decode(const ModelSpec&, InferRequest* request) {
  *request = std::move(request_);
  return absl::OkStatus();
}

}  // namespace infer
