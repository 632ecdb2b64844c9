#include "models/model.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/quote.h"
#include "runtime/status_macros.h"

namespace infer {
namespace {

std::string Names(const std::vector<TensorSpec>& specs) {
  return absl::StrJoin(specs, ", ", [](std::string* out, const TensorSpec& s) {
    absl::StrAppend(out, "'", s.name, "'");
  });
}

const TensorSpec* Find(const std::vector<TensorSpec>& specs, const std::string& name) {
  for (const TensorSpec& s : specs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

// The bytes of a fixed-size tensor against its shape and datatype: the byte
// size (overflow-checked), or INVALID_ARGUMENT naming `what`.
absl::StatusOr<int64_t> CheckDataBytes(const Tensor& t, absl::string_view what) {
  INFER_ASSIGN_OR_RETURN(const int64_t bytes, ByteSize(t.dtype, t.shape, what));
  if (static_cast<int64_t>(t.data.size()) != bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " has ", t.data.size(), " bytes of data; its shape ", ShapeToString(t.shape),
        " and datatype ", DataTypeName(t.dtype), " need ", bytes));
  }
  return bytes;
}

}  // namespace

std::vector<std::string> Int32InputNames(const ModelSpec& spec) {
  std::vector<std::string> names;
  for (const TensorSpec& t : spec.inputs) {
    if (t.accepts_int32) names.push_back(t.name);
  }
  return names;
}

absl::Status WidenInt32Inputs(const ModelSpec& spec, InferRequest* request) {
  for (Tensor& t : request->inputs) {
    if (t.dtype != DataType::kInt32) continue;
    const TensorSpec* s = Find(spec.inputs, t.name);
    if (s == nullptr || s->dtype != DataType::kInt64 || !s->accepts_int32) continue;
    INFER_ASSIGN_OR_RETURN(const int64_t bytes,
                           CheckDataBytes(t, absl::StrCat("input ", Quote(t.name))));
    const int64_t count = bytes / static_cast<int64_t>(sizeof(int32_t));
    std::string wide(static_cast<size_t>(count) * sizeof(int64_t), '\0');
    const int32_t* from = t.as<int32_t>();
    auto* to = reinterpret_cast<int64_t*>(wide.data());
    for (int64_t i = 0; i < count; ++i) to[i] = from[i];
    t.data = std::move(wide);
    t.dtype = DataType::kInt64;
  }
  return absl::OkStatus();
}

absl::Status ValidateRequestAgainstSpec(const ModelSpec& spec, const InferRequest& request) {
  // Which of spec.inputs the request gives; a model has a handful of inputs.
  absl::InlinedVector<bool, 8> seen(spec.inputs.size(), false);
  int64_t batch = -1;
  for (const Tensor& t : request.inputs) {
    // Built only for an error message (CheckNamed): this runs per request.
    auto what = [&t] { return absl::StrCat("input ", Quote(t.name)); };
    const TensorSpec* s = Find(spec.inputs, t.name);
    if (s == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown ", what(), " for model '", spec.name,
                                                     "'; expected inputs: ", Names(spec.inputs)));
    }
    const size_t index = static_cast<size_t>(s - spec.inputs.data());
    if (seen[index]) {
      return absl::InvalidArgumentError(absl::StrCat(what(), " is given more than once"));
    }
    seen[index] = true;
    if (t.dtype != s->dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          what(), " has datatype ", DataTypeName(t.dtype), "; model '", spec.name, "' expects ",
          DataTypeName(s->dtype), s->accepts_int32 ? " (or INT32)" : ""));
    }
    if (t.shape.size() != s->shape.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what(), " has shape ", ShapeToString(t.shape), " (rank ", t.shape.size(), "); model '",
          spec.name, "' expects rank ", s->shape.size(), " ", ShapeToString(s->shape)));
    }
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (s->shape[d] >= 0 && t.shape[d] != s->shape[d]) {
        return absl::InvalidArgumentError(
            absl::StrCat(what(), " has shape ", ShapeToString(t.shape), "; model '", spec.name,
                         "' expects ", ShapeToString(s->shape)));
      }
    }
    INFER_ASSIGN_OR_RETURN(
        const int64_t count,
        CheckNamed([&](absl::string_view w) { return ElementCount(t.shape, w); }, what));
    if (t.dtype == DataType::kBytes) {
      INFER_RETURN_IF_ERROR(CheckNamed(
          [&](absl::string_view w) { return BytesElements(t, count, w).status(); }, what));
    } else {
      INFER_RETURN_IF_ERROR(
          CheckNamed([&](absl::string_view w) { return CheckDataBytes(t, w).status(); }, what));
    }
    // A shared input's first dimension is its spec's fixed 1 (checked
    // above), not the batch.
    if (!s->shared && !t.shape.empty()) {
      // A request with no row has nothing to compute: refused, not
      // answered with no rows.
      if (t.shape[0] == 0) return absl::InvalidArgumentError(absl::StrCat(what(), " is empty"));
      if (batch >= 0 && t.shape[0] != batch) {
        return absl::InvalidArgumentError(absl::StrCat(what(), " has batch dimension ", t.shape[0],
                                                       " but another input has ", batch));
      }
      batch = t.shape[0];
    }
  }
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const TensorSpec& s = spec.inputs[i];
    if (!s.optional && !seen[i]) {
      return absl::InvalidArgumentError(absl::StrCat("missing input '", s.name, "' for model '",
                                                     spec.name,
                                                     "'; expected inputs: ", Names(spec.inputs)));
    }
  }
  absl::flat_hash_set<std::string> outputs;
  for (const std::string& name : request.requested_outputs) {
    if (Find(spec.outputs, name) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown output ", Quote(name), " requested from model '", spec.name,
                       "'; available outputs: ", Names(spec.outputs)));
    }
    if (!outputs.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("output ", Quote(name), " is requested more than once"));
    }
  }
  return CheckRequestOptions(spec, request);
}

absl::StatusOr<std::string> Model::PromptText(const std::string& prompt_name) const {
  if (prompt_name.empty()) return std::string();
  return absl::InvalidArgumentError(
      absl::StrCat("model '", spec().name, "' has no prompt ", Quote(prompt_name)));
}

absl::Status CheckDimensions(const ModelSpec& spec, const TensorSpec& output, int64_t dimensions) {
  const int64_t width = output.shape.empty() ? -1 : output.shape.back();
  if (dimensions < 1 || dimensions > width) {
    return absl::InvalidArgumentError(absl::StrCat("'dimensions' is ", dimensions, "; model '",
                                                   spec.name, "' gives embeddings of 1 to ", width,
                                                   " dimensions"));
  }
  if (dimensions != width && !output.matryoshka) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'dimensions' is ", dimensions, "; model '", spec.name, "' gives ", width,
        " only: it does not declare Matryoshka training (its model card's "
        "'loss:MatryoshkaLoss' tag or the 'matryoshka' parameter), so its embeddings cannot be "
        "shortened"));
  }
  return absl::OkStatus();
}

absl::Status CheckRequestOptions(const ModelSpec& spec, const InferRequest& request) {
  if (!request.prompt_name.empty() && std::find(spec.prompts.begin(), spec.prompts.end(),
                                                request.prompt_name) == spec.prompts.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", spec.name, "' has no prompt ", Quote(request.prompt_name),
        spec.prompts.empty() ? " (it has none)"
                             : absl::StrCat("; its prompts: ", absl::StrJoin(spec.prompts, ", "))));
  }
  if (!request.normalize.has_value() && request.dimensions == 0) return absl::OkStatus();
  // The options apply to the embedding output returned: the requested
  // one, or the model's.
  const TensorSpec* embedding = nullptr;
  for (const TensorSpec& o : spec.outputs) {
    const bool returned =
        (request.requested_outputs.empty() && !o.on_request) ||
        std::find(request.requested_outputs.begin(), request.requested_outputs.end(), o.name) !=
            request.requested_outputs.end();
    if (returned && o.normalizable) embedding = &o;
  }
  if (embedding == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("model '", spec.name, "' offers no 'normalize' or 'dimensions' on the ",
                     "outputs asked for (they apply to a transformer model's embedding)"));
  }
  if (request.dimensions != 0) {
    INFER_RETURN_IF_ERROR(CheckDimensions(spec, *embedding, request.dimensions));
  }
  return absl::OkStatus();
}

absl::Status RunPrepared(ModelBatch& batch, Device* device, Stream* stream,
                         absl::Span<InferResponse* const> responses) {
  absl::Status s = batch.Upload(stream);
  if (s.ok()) s = batch.Compute(stream);
  if (s.ok()) s = batch.Download(stream);
  if (device != nullptr) {
    // Whatever was enqueued must finish before the batch's buffers go.
    const absl::Status sync = device->SynchronizeStream(stream);
    if (s.ok()) s = sync;
  }
  if (s.ok()) s = batch.Finish(responses);
  return s;
}

absl::Status RunBatch(Model& model, Device* device, Stream* stream,
                      absl::Span<const InferRequest* const> requests,
                      absl::Span<InferResponse* const> responses) {
  INFER_ASSIGN_OR_RETURN(std::unique_ptr<ModelBatch> batch, model.Prepare(requests));
  return RunPrepared(*batch, device, stream, responses);
}

void AppendFp32Rows(const std::string& name, const float* data, int64_t width,
                    absl::Span<const int64_t> rows_per_request,
                    absl::Span<InferResponse* const> responses) {
  int64_t row = 0;
  for (size_t i = 0; i < responses.size(); ++i) {
    const int64_t b = rows_per_request[i];
    Tensor t;
    t.name = name;
    t.dtype = DataType::kFp32;
    t.shape = {b, width};
    if (b * width > 0) {
      t.data.assign(reinterpret_cast<const char*>(data + row * width), b * width * sizeof(float));
    }
    row += b;
    responses[i]->outputs.push_back(std::move(t));
  }
}

int64_t Model::SequenceLength(const InferRequest& request) const {
  for (const Tensor& t : request.inputs) {
    if (t.shape.size() >= 2) return t.shape[1];
  }
  return 1;
}

int64_t Model::RealTokens(const InferRequest& request) const {
  return RequestBatchSize(request) * SequenceLength(request);
}

int64_t Model::DeclaredSequenceLength(absl::Span<const DeclaredInput> inputs) const {
  for (const DeclaredInput& t : inputs) {
    if (t.shape.size() >= 2) return t.shape[1];
  }
  return 0;
}

const Tensor* FindInput(const InferRequest& request, absl::string_view name) {
  for (const Tensor& t : request.inputs) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

int64_t RequestBatchSize(const InferRequest& request) {
  for (const Tensor& t : request.inputs) {
    if (!t.shape.empty()) return t.shape[0];
  }
  return 1;
}

}  // namespace infer
