#include "models/bert/bert_gen.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/seeded_random.h"
#include "runtime/status_macros.h"

namespace infer {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMinVocab = 128;

BertConfig Shape(int64_t vocab, int64_t hidden, int64_t layers, int64_t heads, int64_t intermediate,
                 int64_t max_pos) {
  BertConfig c;
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.intermediate_size = intermediate;
  c.max_position_embeddings = max_pos;
  c.type_vocab_size = 2;
  c.pad_token_id = 0;
  c.layer_norm_eps = 1e-12;
  c.hidden_act = "gelu";
  return c;
}

const std::map<std::string, BertConfig>& Presets() {
  static const auto* presets = new std::map<std::string, BertConfig>{
      {"tiny", Shape(256, 32, 2, 4, 64, 64)},
      {"minilm-l6", Shape(30522, 384, 6, 12, 1536, 512)},
      {"bge-small", Shape(30522, 384, 12, 12, 1536, 512)},
      {"bert-base", Shape(30522, 768, 12, 12, 3072, 512)},
      {"bert-large", Shape(30522, 1024, 24, 16, 4096, 512)},
  };
  return *presets;
}

// A WordPiece vocabulary of exactly `size` entries.
std::vector<std::string> SyntheticVocab(int64_t size) {
  std::vector<std::string> v = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  std::vector<std::string> chars;
  for (char c = 'a'; c <= 'z'; ++c) chars.emplace_back(1, c);
  for (char c = '0'; c <= '9'; ++c) chars.emplace_back(1, c);
  for (const char* p : {".", ",", "!", "?", "'", "-", ":", ";", "(", ")"}) chars.emplace_back(p);
  for (const std::string& c : chars) v.push_back(c);
  for (char c = 'a'; c <= 'z'; ++c) v.push_back(std::string("##") + c);
  // Then syllables and words made of them, as whole words and continuations.
  static const char* kOnsets[] = {"b", "c", "d", "f", "g", "h", "k",  "l",  "m",  "n",
                                  "p", "r", "s", "t", "v", "w", "st", "tr", "ch", "sh"};
  static const char* kVowels[] = {"a", "e", "i", "o", "u", "ai", "ea", "ou"};
  std::vector<std::string> syllables;
  for (const char* o : kOnsets) {
    for (const char* w : kVowels) syllables.push_back(std::string(o) + w);
  }
  for (size_t i = 0; static_cast<int64_t>(v.size()) < size; ++i) {
    const size_t n = syllables.size();
    std::string word = syllables[i % n];
    if (i >= n) word += syllables[(i / n - 1) % n];
    if (i >= n * (n + 1)) word = absl::StrCat(word, i / (n * (n + 1)));
    v.push_back(i % 3 == 2 ? "##" + word : word);
  }
  v.resize(size);
  return v;
}

absl::Status WriteLines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path, std::ios::trunc);
  for (const std::string& l : lines) out << l << '\n';
  if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::Status MakeDir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> BertPresetNames() {
  std::vector<std::string> names;
  for (const auto& [name, c] : Presets()) names.push_back(name);
  return names;
}

absl::StatusOr<BertConfig> BertPreset(absl::string_view name) {
  auto it = Presets().find(std::string(name));
  if (it == Presets().end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown preset '", name, "'; known: ", absl::StrJoin(BertPresetNames(), ", ")));
  }
  return it->second;
}

absl::Status GenerateBertCheckpoint(const std::string& dir, const BertGenOptions& options) {
  const BertConfig& c = options.config;
  if (c.vocab_size < kMinVocab) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab_size ", c.vocab_size, " is below the minimum of ", kMinVocab));
  }
  if (c.hidden_size < 1 || c.num_attention_heads < 1 || c.num_hidden_layers < 1 ||
      c.intermediate_size < 1 || c.max_position_embeddings < 1 || c.type_vocab_size < 1 ||
      c.hidden_size % c.num_attention_heads != 0) {
    return absl::InvalidArgumentError(
        "every size must be positive and hidden_size divisible by num_attention_heads");
  }
  INFER_RETURN_IF_ERROR(MakeDir(dir));
  uint64_t state = options.seed;
  std::map<std::string, CheckpointTensor> t;
  const float w_scale = 0.02f * std::sqrt(3.0f);  // uniform with standard deviation 0.02
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float scale, float center) {
    CheckpointTensor& x = t[name];
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    x.shape = std::move(shape);
    x.values.resize(n);
    FillUniform(x.values, state, scale, center);
  };
  auto linear = [&](const std::string& p, int64_t out, int64_t in) {
    add(p + ".weight", {out, in}, w_scale, 0.0f);
    add(p + ".bias", {out}, 0.02f, 0.0f);
  };
  auto norm = [&](const std::string& p, int64_t h) {
    add(p + ".weight", {h}, 0.1f, 1.0f);
    add(p + ".bias", {h}, 0.02f, 0.0f);
  };
  const int64_t h = c.hidden_size;
  add("embeddings.word_embeddings.weight", {c.vocab_size, h}, w_scale, 0.0f);
  add("embeddings.position_embeddings.weight", {c.max_position_embeddings, h}, w_scale, 0.0f);
  add("embeddings.token_type_embeddings.weight", {c.type_vocab_size, h}, w_scale, 0.0f);
  norm("embeddings.LayerNorm", h);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = absl::StrCat("encoder.layer.", i, ".");
    linear(p + "attention.self.query", h, h);
    linear(p + "attention.self.key", h, h);
    linear(p + "attention.self.value", h, h);
    linear(p + "attention.output.dense", h, h);
    norm(p + "attention.output.LayerNorm", h);
    linear(p + "intermediate.dense", c.intermediate_size, h);
    linear(p + "output.dense", h, c.intermediate_size);
    norm(p + "output.LayerNorm", h);
  }
  linear("pooler.dense", h, h);  // unused by mean pooling; transformers expects it
  INFER_RETURN_IF_ERROR(WriteSafetensors(dir + "/model.safetensors", t, options.dtype));
  INFER_RETURN_IF_ERROR(WriteBertConfig(dir + "/config.json", c));
  return WriteLines(dir + "/vocab.txt", SyntheticVocab(c.vocab_size));
}

absl::Status ConvertCheckpoint(const std::string& src, const std::string& dst,
                               const std::string& dtype) {
  INFER_ASSIGN_OR_RETURN(const auto tensors, ReadSafetensors(src + "/model.safetensors"));
  INFER_RETURN_IF_ERROR(MakeDir(dst));
  // config.json is needed; the tokenizer and sentence-transformers files
  // are copied where the source has them, so the copy tokenizes, pools and
  // limits its length as the original does.
  for (const char* f :
       {"config.json", "vocab.txt", "tokenizer.json", "tokenizer_config.json",
        "special_tokens_map.json", "sentence_bert_config.json", "1_Pooling/config.json"}) {
    const bool required = std::string(f) == "config.json";
    if (!required && !fs::exists(fs::path(src) / f)) continue;
    std::error_code ec;
    fs::create_directories((fs::path(dst) / f).parent_path(), ec);
    fs::copy_file(fs::path(src) / f, fs::path(dst) / f, fs::copy_options::overwrite_existing, ec);
    if (ec)
      return absl::NotFoundError(absl::StrCat("cannot copy ", src, "/", f, ": ", ec.message()));
  }
  return WriteSafetensors(dst + "/model.safetensors", tensors, dtype);
}

}  // namespace infer
