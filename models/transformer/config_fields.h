// The config.json readers the transformer families share
// (models/transformer/transformer_spec.cc, and the families written from
// their authors' own modelling code in remote_code_families.cc): a field
// reader whose errors name the file and field, the sizes every family has,
// the activation names, the classification labels. Internal to
// ParseTransformerSpec.
//
// Thread-compatible (a view of a parsed JSON document).
#ifndef INFER_MODELS_TRANSFORMER_CONFIG_FIELDS_H_
#define INFER_MODELS_TRANSFORMER_CONFIG_FIELDS_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "models/transformer/transformer_spec.h"

namespace infer::config_detail {

using Json = nlohmann::json;

// Reads config.json fields, each error naming the file and the field.
class Fields {
 public:
  Fields(const Json& j, const std::string& path) : j_(j), path_(path) {}

  absl::Status Bad(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", what));
  }
  bool Has(const char* field) const { return j_.contains(field) && !j_[field].is_null(); }
  const Json& at(const char* field) const { return j_[field]; }

  // A positive integer; `fallback` when absent (0: required).
  absl::StatusOr<int64_t> Positive(const char* field, int64_t fallback = 0) const {
    if (!Has(field) && fallback > 0) return fallback;
    if (!Has(field) || !j_[field].is_number_integer() || j_[field].get<int64_t>() < 1) {
      return Bad(absl::StrCat("field '", field, "' must be a positive integer"));
    }
    return j_[field].get<int64_t>();
  }
  absl::StatusOr<int64_t> NonNegative(const char* field, int64_t fallback) const {
    if (!Has(field)) return fallback;
    if (!j_[field].is_number_integer() || j_[field].get<int64_t>() < 0) {
      return Bad(absl::StrCat("field '", field, "' must be a non-negative integer"));
    }
    return j_[field].get<int64_t>();
  }
  absl::StatusOr<double> PositiveNumber(const char* field, double fallback) const {
    if (!Has(field)) return fallback;
    if (!j_[field].is_number() || !(j_[field].get<double>() > 0)) {
      return Bad(absl::StrCat("field '", field, "' must be a positive number"));
    }
    return j_[field].get<double>();
  }
  absl::StatusOr<bool> Bool(const char* field, bool fallback) const {
    if (!Has(field)) return fallback;
    if (!j_[field].is_boolean()) return Bad(absl::StrCat("field '", field, "' must be a boolean"));
    return j_[field].get<bool>();
  }
  absl::StatusOr<std::string> String(const char* field, const std::string& fallback) const {
    if (!Has(field)) return fallback;
    if (!j_[field].is_string()) return Bad(absl::StrCat("field '", field, "' must be a string"));
    return j_[field].get<std::string>();
  }

 private:
  const Json& j_;
  const std::string path_;
};

// The config.json names of the sizes every family has: those BERT and
// Llama configs share, or DistilBERT's and NomicBERT's own (GPT-2's).
struct SizeNames {
  const char* hidden = "hidden_size";
  const char* layers = "num_hidden_layers";
  const char* heads = "num_attention_heads";
  const char* kv_heads = "num_key_value_heads";
  const char* intermediate = "intermediate_size";
  const char* positions = "max_position_embeddings";
  int64_t intermediate_fallback = 0;  // when the field is absent or null (0: required)
};

// The sizes, KV heads, positions, pad id and head size, bounded (a
// malformed config.json cannot size a table past memory).
absl::Status CommonSizes(const Fields& f, TransformerSpec* s, const SizeNames& names = {});

// `field`'s activation name: gelu, gelu_new / gelu_pytorch_tanh / gelu_fast
// (tanh form), silu / swish.
absl::StatusOr<ActivationKind> Activation(const Fields& f, const char* field,
                                          const std::string& fallback);

// Whether architectures names a *ForSequenceClassification model.
bool NamesSequenceClassifier(const Fields& f);

// The labels of a *ForSequenceClassification checkpoint (architectures),
// from id2label or num_labels; none otherwise.
absl::Status ClassificationLabels(const Fields& f, TransformerSpec* s);

// θ of one layer type: rope_parameters (transformers 5: one object, or one
// per layer type), rope_scaling, or the top-level `legacy_field`; "linear"
// scaling sets s->rope_linear_factor; other scalings are refused.
absl::StatusOr<double> RopeTheta(const Fields& f, TransformerSpec* s, const std::string& layer_type,
                                 const char* legacy_field, double fallback);

// The families of remote_code_families.cc.
absl::Status NomicBert(const Fields& f, TransformerSpec* s);
absl::Status Gte(const Fields& f, TransformerSpec* s);

}  // namespace infer::config_detail

#endif  // INFER_MODELS_TRANSFORMER_CONFIG_FIELDS_H_
