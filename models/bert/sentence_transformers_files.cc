#include "models/bert/sentence_transformers_files.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "runtime/json_parse.h"
#include "runtime/status_macros.h"

namespace infer {

namespace {

// The class name of a modules.json entry's type (the part after the last
// dot), empty for an entry without a type.
std::string ModuleClass(const nlohmann::json& m) {
  if (!m.is_object() || !m.contains("type") || !m["type"].is_string()) return "";
  const std::string type = m["type"].get<std::string>();
  const size_t dot = type.rfind('.');
  return dot == std::string::npos ? type : type.substr(dot + 1);
}

// modules.json's entries (unset when the file is absent; INVALID_ARGUMENT
// when it is not a list).
absl::StatusOr<std::optional<nlohmann::json>> Modules(const std::string& dir) {
  INFER_ASSIGN_OR_RETURN(std::optional<nlohmann::json> parsed,
                         ParseOptionalJsonFile(dir + "/modules.json"));
  if (parsed.has_value() && !parsed->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(dir, "/modules.json is not a list of modules"));
  }
  return parsed;
}

// A module's settings: the config.json in its folder (unset when absent).
struct ModuleFile {
  bool listed = false;  // modules.json lists a module of the kind
  std::string path;     // its config.json
  std::optional<nlohmann::json> config;
};

// The first module of class `kind` modules.json lists, in the folder it
// names (which must lie inside `dir`); else, with a `fallback` folder, that
// one's (what sentence-transformers writes, e.g. 1_Pooling).
absl::StatusOr<ModuleFile> ModuleConfig(const std::string& dir, const std::string& kind,
                                        const char* fallback) {
  ModuleFile file;
  std::string folder = fallback == nullptr ? "" : fallback;
  INFER_ASSIGN_OR_RETURN(std::optional<nlohmann::json> modules, Modules(dir));
  for (const nlohmann::json& m : modules.value_or(nlohmann::json::array())) {
    if (ModuleClass(m) != kind) continue;
    const std::string named =
        m.contains("path") && m["path"].is_string() ? m["path"].get<std::string>() : "";
    const std::filesystem::path p = std::filesystem::path(named).lexically_normal();
    if (named.empty() || p.is_absolute() || p == "." ||
        std::find(p.begin(), p.end(), "..") != p.end()) {
      return absl::InvalidArgumentError(absl::StrCat(dir, "/modules.json: the ", kind,
                                                     " module's path '", named,
                                                     "' must be a folder inside the model folder"));
    }
    file.listed = true;
    folder = named;
    break;
  }
  if (folder.empty()) return file;
  file.path = absl::StrCat(dir, "/", folder, "/config.json");
  INFER_ASSIGN_OR_RETURN(file.config, ParseOptionalJsonFile(file.path));
  return file;
}

// The Pooling module's config.json (its path in *path).
absl::StatusOr<std::optional<nlohmann::json>> PoolingConfig(const std::string& dir,
                                                            std::string* path) {
  INFER_ASSIGN_OR_RETURN(ModuleFile file, ModuleConfig(dir, "Pooling", "1_Pooling"));
  *path = file.path;
  return std::move(file.config);
}

// Whether the Pooling module's include_prompt is false.
absl::StatusOr<bool> PoolingLeavesPromptOut(const std::string& dir, std::string* path) {
  INFER_ASSIGN_OR_RETURN(std::optional<nlohmann::json> pooling, PoolingConfig(dir, path));
  return pooling.has_value() && pooling->is_object() && pooling->contains("include_prompt") &&
         (*pooling)["include_prompt"] == false;
}

}  // namespace

// The pooling a sentence-transformers checkpoint's Pooling module declares
// (mean when its config.json is absent).
absl::StatusOr<Pooling> SentenceTransformersPooling(const std::string& dir) {
  std::string path;
  INFER_ASSIGN_OR_RETURN(std::optional<nlohmann::json> parsed, PoolingConfig(dir, &path));
  if (!parsed.has_value()) return Pooling::kMean;
  const nlohmann::json& j = *parsed;
  auto flag = [&](const char* key) {
    return j.is_object() && j.contains(key) && j[key].is_boolean() && j[key].get<bool>();
  };
  if (flag("pooling_mode_mean_tokens")) return Pooling::kMean;
  if (flag("pooling_mode_cls_token")) return Pooling::kCls;
  if (flag("pooling_mode_lasttoken")) return Pooling::kLastToken;
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": only pooling_mode_mean_tokens, pooling_mode_cls_token or pooling_mode_lasttoken ",
      "is supported"));
}

absl::StatusOr<std::optional<bool>> SentenceTransformersNormalize(const std::string& dir) {
  INFER_ASSIGN_OR_RETURN(std::optional<nlohmann::json> modules, Modules(dir));
  if (!modules.has_value()) return std::optional<bool>();
  for (const nlohmann::json& m : *modules) {
    if (ModuleClass(m) == "Normalize") return std::optional<bool>(true);
  }
  return std::optional<bool>(false);
}

absl::StatusOr<std::optional<SpladePooling>> SentenceTransformersSplade(const std::string& dir) {
  INFER_ASSIGN_OR_RETURN(ModuleFile file, ModuleConfig(dir, "SpladePooling", nullptr));
  if (!file.listed) return std::optional<SpladePooling>();
  const std::optional<nlohmann::json>& config = file.config;
  SpladePooling pooling;  // sentence-transformers' defaults: max, relu
  if (!config.has_value() || !config->is_object()) return std::optional(pooling);
  auto text = [&](const char* key, const char* fallback) -> std::string {
    return config->contains(key) && (*config)[key].is_string() ? (*config)[key].get<std::string>()
                                                               : fallback;
  };
  const std::string strategy = text("pooling_strategy", "max");
  const std::string activation = text("activation_function", "relu");
  if ((strategy != "max" && strategy != "sum") ||
      (activation != "relu" && activation != "log1p_relu")) {
    return absl::InvalidArgumentError(absl::StrCat(
        file.path, ": pooling_strategy '", strategy, "' and activation_function '", activation,
        "'; computed: pooling_strategy max or sum, activation_function relu or log1p_relu"));
  }
  pooling.sum = strategy == "sum";
  pooling.log1p_twice = activation == "log1p_relu";
  return std::optional(pooling);
}

// sentence_bert_config.json's max_seq_length (unset when the file or the
// field is absent).
absl::StatusOr<std::optional<int64_t>> SentenceTransformersMaxLength(const std::string& dir) {
  const std::string path = dir + "/sentence_bert_config.json";
  INFER_ASSIGN_OR_RETURN(std::optional<nlohmann::json> parsed, ParseOptionalJsonFile(path));
  if (!parsed.has_value()) return std::optional<int64_t>();
  nlohmann::json& j = *parsed;
  if (!j.is_object() || !j.contains("max_seq_length") || j["max_seq_length"].is_null()) {
    return std::optional<int64_t>();
  }
  if (!j["max_seq_length"].is_number_integer() || j["max_seq_length"].get<int64_t>() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": max_seq_length is not a positive integer"));
  }
  return std::optional<int64_t>(j["max_seq_length"].get<int64_t>());
}

// The prompt sentence-transformers prepends to every text:
// config_sentence_transformers.json's prompts[`name`], or its
// default_prompt_name's when `name` is empty (none when neither). With a
// prompt, the Pooling module's include_prompt must not be false (pooling
// that leaves the prompt's tokens out is not computed).
absl::StatusOr<std::pair<std::string, std::string>> SentenceTransformersPrompt(
    const std::string& dir, std::string name) {
  const std::string path = dir + "/config_sentence_transformers.json";
  INFER_ASSIGN_OR_RETURN(std::optional<nlohmann::json> parsed, ParseOptionalJsonFile(path));
  nlohmann::json prompts = nlohmann::json::object();
  if (parsed.has_value() && parsed->is_object()) {
    if (parsed->contains("prompts") && (*parsed)["prompts"].is_object()) {
      prompts = (*parsed)["prompts"];
    }
    if (name.empty() && parsed->contains("default_prompt_name") &&
        (*parsed)["default_prompt_name"].is_string()) {
      name = (*parsed)["default_prompt_name"].get<std::string>();
    }
  }
  if (name.empty()) return std::pair<std::string, std::string>();
  if (!prompts.contains(name) || !prompts[name].is_string()) {
    std::string known;
    for (const auto& [key, value] : prompts.items()) absl::StrAppend(&known, " '", key, "'");
    return absl::InvalidArgumentError(absl::StrCat("prompt '", name, "' is not in ", path,
                                                   known.empty() ? " (it has none)" : "; it has",
                                                   known));
  }
  const std::string prompt = prompts[name].get<std::string>();
  std::string pooling_path;
  INFER_ASSIGN_OR_RETURN(const bool prompt_left_out, PoolingLeavesPromptOut(dir, &pooling_path));
  if (!prompt.empty() && prompt_left_out) {
    return absl::InvalidArgumentError(
        absl::StrCat(pooling_path,
                     ": include_prompt false (pooling without the prompt's tokens) is not "
                     "supported"));
  }
  return std::pair<std::string, std::string>(name, prompt);
}

absl::StatusOr<std::map<std::string, std::string>> SentenceTransformersPrompts(
    const std::string& dir) {
  std::map<std::string, std::string> out;
  INFER_ASSIGN_OR_RETURN(std::optional<nlohmann::json> parsed,
                         ParseOptionalJsonFile(dir + "/config_sentence_transformers.json"));
  if (!parsed.has_value() || !parsed->is_object() || !parsed->contains("prompts") ||
      !(*parsed)["prompts"].is_object()) {
    return out;
  }
  std::string pooling_path;
  INFER_ASSIGN_OR_RETURN(const bool prompt_left_out, PoolingLeavesPromptOut(dir, &pooling_path));
  if (prompt_left_out) return out;
  for (const auto& [name, text] : (*parsed)["prompts"].items()) {
    if (text.is_string()) out.emplace(name, text.get<std::string>());
  }
  return out;
}

// Reads the front matter line by line (a YAML parser for one list would be
// a dependency for a substring match): the block between a first line
// "---" and the next, bounded to 64 KiB so a large card costs nothing.
bool ModelCardDeclaresMatryoshka(const std::string& dir) {
  std::ifstream in(dir + "/README.md");
  std::string line;
  if (!std::getline(in, line) || absl::StripAsciiWhitespace(line) != "---") return false;
  size_t read = 0;
  while (std::getline(in, line) && (read += line.size()) < (64 << 10)) {
    absl::string_view l = absl::StripAsciiWhitespace(line);
    if (l == "---") return false;
    if (!absl::ConsumePrefix(&l, "-")) continue;  // a list item: "- tag"
    const absl::string_view tag = absl::StripAsciiWhitespace(l);
    if (absl::EqualsIgnoreCase(tag, "loss:MatryoshkaLoss") ||
        absl::EqualsIgnoreCase(tag, "matryoshka")) {
      return true;
    }
  }
  return false;
}

}  // namespace infer
