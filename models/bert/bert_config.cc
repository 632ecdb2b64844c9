#include "models/bert/bert_config.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "models/checkpoint.h"
#include "runtime/json_parse.h"
#include "runtime/status_macros.h"

namespace infer {

using Json = nlohmann::json;

absl::Status WriteBertConfig(const std::string& path, const BertConfig& c) {
  const Json j = {{"architectures", {"BertModel"}},
                  {"model_type", "bert"},
                  {"vocab_size", c.vocab_size},
                  {"hidden_size", c.hidden_size},
                  {"num_hidden_layers", c.num_hidden_layers},
                  {"num_attention_heads", c.num_attention_heads},
                  {"intermediate_size", c.intermediate_size},
                  {"max_position_embeddings", c.max_position_embeddings},
                  {"type_vocab_size", c.type_vocab_size},
                  {"pad_token_id", c.pad_token_id},
                  {"layer_norm_eps", c.layer_norm_eps},
                  {"hidden_act", c.hidden_act},
                  {"hidden_dropout_prob", 0.0},
                  {"attention_probs_dropout_prob", 0.0},
                  {"initializer_range", 0.02},
                  {"position_embedding_type", "absolute"}};
  std::ofstream out(path, std::ios::trunc);
  out << j.dump(2) << "\n";
  if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<BertConfig> ReadBertConfig(const std::string& path) {
  INFER_ASSIGN_OR_RETURN(const std::string text, ReadCheckpointFile(path));
  return ParseBertConfig(text, path);
}

absl::StatusOr<BertConfig> ParseBertConfig(const std::string& text, const std::string& path) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  };
  absl::StatusOr<Json> parsed = ParseJson(text, "the file");
  if (!parsed.ok()) return bad(std::string(parsed.status().message()));
  const Json& j = *parsed;
  if (!j.is_object()) return bad("not a JSON object");
  BertConfig c;
  auto positive = [&](const char* field, int64_t* out) -> absl::Status {
    if (!j.contains(field) || !j[field].is_number_integer() || j[field].get<int64_t>() < 1) {
      return bad(absl::StrCat("field '", field, "' must be a positive integer"));
    }
    *out = j[field].get<int64_t>();
    return absl::OkStatus();
  };
  INFER_RETURN_IF_ERROR(positive("vocab_size", &c.vocab_size));
  INFER_RETURN_IF_ERROR(positive("hidden_size", &c.hidden_size));
  INFER_RETURN_IF_ERROR(positive("num_hidden_layers", &c.num_hidden_layers));
  INFER_RETURN_IF_ERROR(positive("num_attention_heads", &c.num_attention_heads));
  INFER_RETURN_IF_ERROR(positive("intermediate_size", &c.intermediate_size));
  INFER_RETURN_IF_ERROR(positive("max_position_embeddings", &c.max_position_embeddings));
  if (j.contains("type_vocab_size"))
    INFER_RETURN_IF_ERROR(positive("type_vocab_size", &c.type_vocab_size));
  if (j.contains("pad_token_id") && j["pad_token_id"].is_number_integer()) {
    c.pad_token_id = j["pad_token_id"].get<int64_t>();
  }
  if (j.contains("layer_norm_eps")) {
    if (!j["layer_norm_eps"].is_number() || j["layer_norm_eps"].get<double>() <= 0) {
      return bad("field 'layer_norm_eps' must be a positive number");
    }
    c.layer_norm_eps = j["layer_norm_eps"].get<double>();
  }
  c.hidden_act = j.contains("hidden_act") && j["hidden_act"].is_string()
                     ? j["hidden_act"].get<std::string>()
                     : "gelu";
  if (c.hidden_act != "gelu") {
    return bad(absl::StrCat("field 'hidden_act' = '", c.hidden_act, "'; supported: gelu"));
  }
  if (c.hidden_size % c.num_attention_heads != 0) {
    return bad(absl::StrCat("hidden_size ", c.hidden_size, " is not divisible by ",
                            "num_attention_heads ", c.num_attention_heads));
  }
  if (c.pad_token_id < 0 || c.pad_token_id >= c.vocab_size) {
    return bad(absl::StrCat("field 'pad_token_id' = ", c.pad_token_id, " is outside [0, ",
                            c.vocab_size, ")"));
  }
  return c;
}

}  // namespace infer
