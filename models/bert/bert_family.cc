// The bert family in the model registry (models/registry.h): a Hugging Face
// transformer checkpoint folder (config.json of any family
// models/transformer/transformer_spec.h lists, model.safetensors, and
// tokenizer.json or vocab.txt) served as a sentence encoder.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "models/bert/bert_model.h"
#include "models/registry.h"
#include "runtime/status_macros.h"

namespace infer {
namespace {

absl::StatusOr<std::unique_ptr<Model>> Create(const char* backend, const ModelOptions& options,
                                              const DeviceContext& context) {
  const ModelParams& params = options.params;
  const std::string& model_dir = options.model_dir;
  BertModelOptions o;
  o.name = options.name;
  o.backend = backend;
  o.precision = options.precision;
  if (options.cuda_graphs.enabled.has_value()) o.graphs.enabled = *options.cuda_graphs.enabled;
  if (options.cuda_graphs.max_tokens > 0) o.graphs.max_tokens = options.cuda_graphs.max_tokens;
  o.checkpoint_dir = model_dir;
  if (auto it = params.find("checkpoint_dir"); it != params.end()) {
    // Relative paths are relative to the model's folder.
    o.checkpoint_dir = !it->second.empty() && it->second[0] == '/'
                           ? it->second
                           : absl::StrCat(model_dir, "/", it->second);
  }
  if (auto it = params.find("pooling"); it != params.end()) {
    if (it->second == "mean") {
      o.pooling = Pooling::kMean;
    } else if (it->second == "cls") {
      o.pooling = Pooling::kCls;
    } else if (it->second == "last_token") {
      o.pooling = Pooling::kLastToken;
    } else if (it->second == "splade") {
      o.splade = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("parameter 'pooling' = '", it->second,
                                                     "' is not mean, cls, last_token or splade"));
    }
  }
  if (params.count("normalize") != 0) {
    bool normalize = true;
    INFER_RETURN_IF_ERROR(ParseBoolParam(params, "normalize", &normalize));
    o.normalize = normalize;
  }
  INFER_RETURN_IF_ERROR(ParseBoolParam(params, "batch_invariant", &o.batch_invariant));
  INFER_RETURN_IF_ERROR(ParseBoolParam(params, "precision_gate", &o.precision_gate));
  INFER_RETURN_IF_ERROR(ParseBoolParam(params, "cuda_fused_epilogues", &o.cublaslt_epilogues));
  INFER_RETURN_IF_ERROR(ParseIntParam(params, "max_sequence_length", &o.max_sequence_length));
  INFER_RETURN_IF_ERROR(ParseBoolParam(params, "auto_truncate", &o.auto_truncate));
  if (auto it = params.find("prompt_name"); it != params.end()) o.prompt_name = it->second;
  if (auto it = params.find("prompt"); it != params.end()) o.prompt = it->second;
  if (auto it = params.find("dense_path"); it != params.end()) o.dense_path = it->second;
  if (params.count("matryoshka") != 0) {
    bool matryoshka = false;
    INFER_RETURN_IF_ERROR(ParseBoolParam(params, "matryoshka", &matryoshka));
    o.matryoshka = matryoshka;
  }
  INFER_ASSIGN_OR_RETURN(std::unique_ptr<BertModel> model, BertModel::Create(o, context));
  return std::unique_ptr<Model>(std::move(model));
}

absl::StatusOr<std::unique_ptr<Model>> CreateBert(const ModelOptions& options,
                                                  const DeviceContext& context) {
  return Create("bert", options, context);
}

absl::StatusOr<std::unique_ptr<Model>> CreateTransformer(const ModelOptions& options,
                                                         const DeviceContext& context) {
  return Create("transformer", options, context);
}

}  // namespace

// Two names for one backend: "transformer" (what a Hugging Face folder
// without a config.pbtxt is served by), and "bert", its name from before
// it served other families.
extern const ModelFamily kBertFamily;
extern const ModelFamily kTransformerFamily;
// The parameters Create reads: one list for both names.
static const std::vector<std::string> kParameters = {
    "checkpoint_dir",  "normalize",     "max_sequence_length", "pooling",
    "batch_invariant", "auto_truncate", "prompt_name",         "prompt",
    "dense_path",      "matryoshka",    "precision_gate",      "cuda_fused_epilogues"};
const ModelFamily kBertFamily = {"bert", kParameters, CreateBert};
const ModelFamily kTransformerFamily = {"transformer", kParameters, CreateTransformer};

}  // namespace infer
