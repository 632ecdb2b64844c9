// The embed_pool family in the model registry (models/registry.h).
#include <memory>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "models/embed_pool/embed_pool.h"
#include "models/registry.h"
#include "runtime/status_macros.h"

namespace infer {
namespace {

absl::StatusOr<std::unique_ptr<Model>> Create(const ModelOptions& options,
                                              const DeviceContext& context) {
  INFER_RETURN_IF_ERROR(CheckFixedPrecision("embed_pool", options, Precision::kFp32));
  const ModelParams& params = options.params;
  EmbedPoolOptions o;
  o.name = options.name;
  INFER_RETURN_IF_ERROR(ParseIntParam(params, "vocab_size", &o.vocab_size));
  INFER_RETURN_IF_ERROR(ParseIntParam(params, "hidden_size", &o.hidden_size));
  INFER_RETURN_IF_ERROR(ParseIntParam(params, "embedding_size", &o.embedding_size));
  INFER_RETURN_IF_ERROR(ParseIntParam(params, "pad_id", &o.pad_id));
  INFER_RETURN_IF_ERROR(ParseIntParam(params, "max_sequence_length", &o.max_sequence_length));
  if (auto it = params.find("seed"); it != params.end() && !absl::SimpleAtoi(it->second, &o.seed)) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter 'seed' = '", it->second, "' is not an integer"));
  }
  INFER_ASSIGN_OR_RETURN(std::unique_ptr<EmbedPoolModel> model, EmbedPoolModel::Create(o, context));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace

extern const ModelFamily kEmbedPoolFamily;
const ModelFamily kEmbedPoolFamily = {
    "embed_pool",
    {"vocab_size", "hidden_size", "embedding_size", "pad_id", "max_sequence_length", "seed"},
    Create};

}  // namespace infer
