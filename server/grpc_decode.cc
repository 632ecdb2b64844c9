#include "server/grpc_decode.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "runtime/quote.h"
#include "runtime/status_macros.h"
#include "server/proto_codec.h"

namespace infer {

absl::Status CheckVersion(const std::string& model, const std::string& version) {
  if (version.empty() || version == kModelVersion) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat("model ", Quote(model), " has no version ",
                                          Quote(version), "; available versions: 1"));
}

namespace {

// The request limits that need only the declared shapes, checked on the
// protobuf before RequestFromProto copies any contents (typed contents
// can be a few times larger decoded than on the wire). An unknown model
// passes: the engine names it.
absl::Status CheckDeclaredLimits(Engine& engine, const inference::ModelInferRequest& req) {
  std::vector<DeclaredInput> inputs;
  inputs.reserve(static_cast<size_t>(req.inputs_size()));
  int64_t text_bytes = 0;
  for (int i = 0; i < req.inputs_size(); ++i) {
    const auto& in = req.inputs(i);
    inputs.push_back({in.name(), absl::MakeConstSpan(in.shape().data(), in.shape().size())});
    if (in.datatype() != "BYTES") continue;
    if (i < req.raw_input_contents_size()) {
      text_bytes += static_cast<int64_t>(req.raw_input_contents(i).size());
    }
    for (const std::string& b : in.contents().bytes_contents()) {
      text_bytes += 4 + static_cast<int64_t>(b.size());  // as in the raw layout
    }
  }
  return engine.CheckDeclared(req.model_name(), inputs, text_bytes);
}

}  // namespace

absl::StatusOr<InferRequest> DecodeInferRequest(Engine& engine, inference::ModelInferRequest* req) {
  if (absl::Status s = CheckVersion(req->model_name(), req->model_version()); !s.ok()) {
    engine.RecordRefused(req->model_name(), s);
    return s;
  }
  INFER_RETURN_IF_ERROR(CheckDeclaredLimits(engine, *req));  // counted by the engine
  absl::StatusOr<InferRequest> converted = RequestFromProto(req);
  if (!converted.ok()) {
    engine.RecordRefused(req->model_name(), converted.status());
  } else {
    converted->declared_limits_checked = true;  // admission need not check them again
  }
  return converted;
}

}  // namespace infer
