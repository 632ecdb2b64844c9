#include "models/registry.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/bert/bert_model.h"
#include "models/embed_pool/embed_pool.h"
#include "models/identity/identity.h"
#include "runtime/status_macros.h"

namespace infer {
namespace {

template <typename T>
absl::Status ParseParam(const ModelParams& params, const std::string& key, T* out) {
  auto it = params.find(key);
  if (it == params.end()) return absl::OkStatus();
  if (!absl::SimpleAtoi(it->second, out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter '", key, "' = '", it->second, "' is not an integer"));
  }
  return absl::OkStatus();
}

// A backend that computes in one precision only takes that or auto.
absl::Status CheckFixedPrecision(absl::string_view backend, Precision precision,
                                 Precision computed) {
  if (precision == Precision::kAuto || precision == computed) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("precision '", PrecisionName(precision),
                                                 "': backend '", backend, "' computes ",
                                                 PrecisionName(computed), " only"));
}

absl::StatusOr<std::unique_ptr<Model>> CreateEmbedPool(const std::string& name,
                                                       const ModelParams& params,
                                                       const DeviceContext& context,
                                                       Precision precision) {
  INFER_RETURN_IF_ERROR(CheckFixedPrecision("embed_pool", precision, Precision::kFp32));
  static const char* const kKeys[] = {"vocab_size", "hidden_size",         "embedding_size",
                                      "pad_id",     "max_sequence_length", "seed"};
  for (const auto& [key, value] : params) {
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown parameter '", key,
                       "' for backend 'embed_pool'; known: ", absl::StrJoin(kKeys, ", ")));
    }
  }
  EmbedPoolOptions o;
  o.name = name;
  INFER_RETURN_IF_ERROR(ParseParam(params, "vocab_size", &o.vocab_size));
  INFER_RETURN_IF_ERROR(ParseParam(params, "hidden_size", &o.hidden_size));
  INFER_RETURN_IF_ERROR(ParseParam(params, "embedding_size", &o.embedding_size));
  INFER_RETURN_IF_ERROR(ParseParam(params, "pad_id", &o.pad_id));
  INFER_RETURN_IF_ERROR(ParseParam(params, "max_sequence_length", &o.max_sequence_length));
  INFER_RETURN_IF_ERROR(ParseParam(params, "seed", &o.seed));
  INFER_ASSIGN_OR_RETURN(std::unique_ptr<EmbedPoolModel> model, EmbedPoolModel::Create(o, context));
  return std::unique_ptr<Model>(std::move(model));
}

absl::StatusOr<std::unique_ptr<Model>> CreateBert(const std::string& name,
                                                  const ModelParams& params,
                                                  const DeviceContext& context,
                                                  const BuiltinModelOptions& options) {
  const std::string& model_dir = options.model_dir;
  static const char* const kKeys[] = {"checkpoint_dir", "normalize", "max_sequence_length",
                                      "pooling", "batch_invariant"};
  for (const auto& [key, value] : params) {
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown parameter '", key, "' for backend 'bert'; known: ", absl::StrJoin(kKeys, ", ")));
    }
  }
  BertModelOptions o;
  o.name = name;
  o.precision = options.precision;
  o.graphs = options.cuda_graphs;
  o.checkpoint_dir = model_dir;
  if (auto it = params.find("checkpoint_dir"); it != params.end()) {
    // Relative paths are relative to the model's folder.
    o.checkpoint_dir = !it->second.empty() && it->second[0] == '/'
                           ? it->second
                           : absl::StrCat(model_dir, "/", it->second);
  }
  if (auto it = params.find("pooling"); it != params.end()) {
    if (it->second != "mean" && it->second != "cls") {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter 'pooling' = '", it->second, "' is not mean or cls"));
    }
    o.pooling = it->second == "cls" ? BertPooling::kCls : BertPooling::kMean;
  }
  for (auto [key, flag] :
       {std::pair{"normalize", &o.normalize}, std::pair{"batch_invariant", &o.batch_invariant}}) {
    if (auto it = params.find(key); it != params.end()) {
      if (it->second != "true" && it->second != "false") {
        return absl::InvalidArgumentError(
            absl::StrCat("parameter '", key, "' = '", it->second, "' is not true or false"));
      }
      *flag = it->second == "true";
    }
  }
  INFER_RETURN_IF_ERROR(ParseParam(params, "max_sequence_length", &o.max_sequence_length));
  INFER_ASSIGN_OR_RETURN(std::unique_ptr<BertModel> model, BertModel::Create(o, context));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> CreateBuiltinModel(absl::string_view backend,
                                                          const std::string& name,
                                                          const ModelParams& params,
                                                          const DeviceContext& context,
                                                          const BuiltinModelOptions& options) {
  const Precision precision = options.precision;
  if (backend == "embed_pool") return CreateEmbedPool(name, params, context, precision);
  if (backend == "bert") return CreateBert(name, params, context, options);
  if (backend == "identity") {
    if (precision != Precision::kAuto) {
      return absl::InvalidArgumentError(absl::StrCat("precision '", PrecisionName(precision),
                                                     "': backend 'identity' computes nothing"));
    }
    if (!params.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "backend 'identity' takes no parameters; got '", params.begin()->first, "'"));
    }
    return std::unique_ptr<Model>(new IdentityModel(name));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown backend '", backend,
                   "'; built-in backends: ", absl::StrJoin(BuiltinBackends(), ", ")));
}

std::vector<std::string> BuiltinBackends() { return {"bert", "embed_pool", "identity"}; }

}  // namespace infer
