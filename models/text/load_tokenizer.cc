#include "models/text/load_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "models/text/unicode.h"
#include "runtime/json_parse.h"
#include "runtime/status_macros.h"

namespace infer::text {
namespace {

// tokenizer_config.json, or an empty object when the folder has none.
absl::StatusOr<nlohmann::json> TokenizerConfig(const std::string& dir) {
  const std::string path = dir + "/tokenizer_config.json";
  INFER_ASSIGN_OR_RETURN(std::optional<nlohmann::json> j, ParseOptionalJsonFile(path));
  if (!j.has_value()) return nlohmann::json::object();
  if (!j->is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not an object"));
  return *std::move(j);
}

absl::StatusOr<std::optional<bool>> ConfigBool(const nlohmann::json& config, const char* key,
                                               const std::string& dir) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::optional<bool>();
  if (!it->is_boolean()) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, "/tokenizer_config.json: \"", key, "\" is not a boolean"));
  }
  return std::optional<bool>(it->get<bool>());
}

}  // namespace

absl::StatusOr<std::unique_ptr<HfTokenizer>> BertTokenizerFromVocab(
    const std::string& vocab_path, const BertVocabOptions& options) {
  std::ifstream in(vocab_path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read vocabulary ", vocab_path));
  nlohmann::json vocab = nlohmann::json::object();
  std::string line;
  for (int64_t id = 0; std::getline(in, line); ++id) {
    // A line is a token; a trailing CR (a file written on Windows) is not
    // part of it.
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!ValidUtf8(line)) {
      return absl::InvalidArgumentError(
          absl::StrCat(vocab_path, ": line ", id + 1, " is not valid UTF-8"));
    }
    if (vocab.contains(line)) {
      return absl::InvalidArgumentError(
          absl::StrCat(vocab_path, ": token \"", line, "\" repeats at line ", id + 1));
    }
    if (id >= (int64_t{1} << 24)) {
      return absl::InvalidArgumentError(absl::StrCat(vocab_path, ": more than 2^24 tokens"));
    }
    vocab[line] = id;
  }
  for (const char* name : {"[UNK]", "[CLS]", "[SEP]"}) {
    if (!vocab.contains(name)) {
      return absl::InvalidArgumentError(absl::StrCat(vocab_path, ": no ", name, " token"));
    }
  }
  // The document transformers' BertConverter makes (what a BERT folder's
  // tokenizer.json holds), run by the same loader as any tokenizer.json.
  nlohmann::json added = nlohmann::json::array();
  for (const char* name : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}) {
    if (!vocab.contains(name)) continue;
    added.push_back({{"id", vocab[name]},
                     {"content", name},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  const int64_t cls = vocab["[CLS]"].get<int64_t>();
  const int64_t sep = vocab["[SEP]"].get<int64_t>();
  auto special = [](const char* id, int type) {
    return nlohmann::json{{"SpecialToken", {{"id", id}, {"type_id", type}}}};
  };
  auto sequence = [](const char* id, int type) {
    return nlohmann::json{{"Sequence", {{"id", id}, {"type_id", type}}}};
  };
  nlohmann::json doc = {
      {"added_tokens", added},
      {"normalizer",
       {{"type", "BertNormalizer"},
        {"clean_text", true},
        {"handle_chinese_chars", options.chinese_chars},
        {"strip_accents", options.strip_accents.has_value() ? nlohmann::json(*options.strip_accents)
                                                            : nlohmann::json(nullptr)},
        {"lowercase", options.lowercase}}},
      {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {special("[CLS]", 0), sequence("A", 0), special("[SEP]", 0)}},
        {"pair",
         {special("[CLS]", 0), sequence("A", 0), special("[SEP]", 0), sequence("B", 1),
          special("[SEP]", 1)}},
        {"special_tokens",
         {{"[CLS]", {{"id", "[CLS]"}, {"ids", {cls}}, {"tokens", {"[CLS]"}}}},
          {"[SEP]", {{"id", "[SEP]"}, {"ids", {sep}}, {"tokens", {"[SEP]"}}}}}}}},
      {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
      {"model",
       {{"type", "WordPiece"},
        {"unk_token", "[UNK]"},
        {"continuing_subword_prefix", "##"},
        {"max_input_chars_per_word", 100},
        {"vocab", std::move(vocab)}}}};
  return HfTokenizer::FromDocument(doc, vocab_path);
}

absl::StatusOr<FolderTokenizer> LoadFolderTokenizer(const std::string& dir) {
  INFER_ASSIGN_OR_RETURN(nlohmann::json config, TokenizerConfig(dir));
  FolderTokenizer out;
  if (std::filesystem::exists(dir + "/tokenizer.json")) {
    out.source = dir + "/tokenizer.json";
    INFER_ASSIGN_OR_RETURN(out.tokenizer, HfTokenizer::FromFile(out.source));
  } else if (std::filesystem::exists(dir + "/vocab.txt")) {
    out.source = dir + "/vocab.txt";
    BertVocabOptions options;
    INFER_ASSIGN_OR_RETURN(std::optional<bool> lower, ConfigBool(config, "do_lower_case", dir));
    INFER_ASSIGN_OR_RETURN(std::optional<bool> chinese,
                           ConfigBool(config, "tokenize_chinese_chars", dir));
    INFER_ASSIGN_OR_RETURN(options.strip_accents, ConfigBool(config, "strip_accents", dir));
    options.lowercase = lower.value_or(true);
    options.chinese_chars = chinese.value_or(true);
    INFER_ASSIGN_OR_RETURN(out.tokenizer, BertTokenizerFromVocab(out.source, options));
  } else {
    return absl::NotFoundError(absl::StrCat(dir, " has neither tokenizer.json nor vocab.txt"));
  }
  // transformers writes a huge number (int(1e30)) for "no limit"; anything
  // past a million positions is taken as that.
  if (auto it = config.find("model_max_length"); it != config.end() && it->is_number()) {
    const double v = it->get<double>();
    if (v >= 1 && v <= 1e6) out.model_max_length = static_cast<int64_t>(v);
  }
  return out;
}

absl::StatusOr<std::unique_ptr<HfTokenizer>> LoadTokenizer(const std::string& path) {
  if (!std::filesystem::is_directory(path)) return HfTokenizer::FromFile(path);
  INFER_ASSIGN_OR_RETURN(FolderTokenizer folder, LoadFolderTokenizer(path));
  return std::move(folder.tokenizer);
}

}  // namespace infer::text
