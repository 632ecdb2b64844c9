#include "server/kserve/proto_request.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "runtime/quote.h"
#include "runtime/status_macros.h"
#include "server/kserve/proto_codec.h"

namespace infer {

absl::Status CheckVersion(const std::string& model, const std::string& version) {
  if (version.empty() || version == kModelVersion) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat("model ", Quote(model), " has no version ",
                                          Quote(version), "; available versions: 1"));
}

absl::Status ProtoRequestSource::Declare(const ModelSpec&, DeclaredRequest* declared) {
  const inference::ModelInferRequest& req = *request_;
  INFER_RETURN_IF_ERROR(CheckVersion(req.model_name(), req.model_version()));
  declared->inputs.reserve(static_cast<size_t>(req.inputs_size()));
  for (int i = 0; i < req.inputs_size(); ++i) {
    const auto& in = req.inputs(i);
    declared->inputs.push_back(
        {in.name(), absl::MakeConstSpan(in.shape().data(), in.shape().size())});
    if (in.datatype() != "BYTES") continue;
    if (i < req.raw_input_contents_size()) {
      declared->text_bytes += static_cast<int64_t>(req.raw_input_contents(i).size());
    }
    for (const std::string& b : in.contents().bytes_contents()) {
      declared->text_bytes += 4 + static_cast<int64_t>(b.size());  // as in the raw layout
    }
  }
  return absl::OkStatus();
}

absl::Status ProtoRequestSource::Decode(const ModelSpec&, InferRequest* request) {
  INFER_ASSIGN_OR_RETURN(*request, RequestFromProto(request_));
  request->deadline = std::min(request->deadline, deadline_);
  if (is_cancelled_) request->is_cancelled = std::move(is_cancelled_);
  return absl::OkStatus();
}

}  // namespace infer
