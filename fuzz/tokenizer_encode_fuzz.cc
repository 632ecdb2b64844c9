// Arbitrary bytes as text through loaded tokenizer.json pipelines, as client
// texts reach them: invalid UTF-8 must be refused with INVALID_ARGUMENT;
// anything else must encode with every field one entry per position, ids
// below vocab_size and offsets inside the text, and the ids alone (the
// serving path, EncodeIds) the same as the encoding's. The first byte picks the
// pipeline (BERT WordPiece; byte-level BPE with a split regex and added
// tokens; SentencePiece-style Unigram with byte fallback), whether a zero
// byte splits the rest into a text and its pair, and a truncation.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/text/hf_tokenizer.h"

namespace {

using infer::text::HfTokenizer;

std::unique_ptr<HfTokenizer> Load(const nlohmann::json& j) {
  auto t = HfTokenizer::FromJson(j.dump(), "fuzz");
  if (!t.ok()) {
    std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
    abort();
  }
  return *std::move(t);
}

nlohmann::json Added() {
  return nlohmann::json::array(
      {{{"id", 0}, {"content", "[CLS]"}, {"special", true}, {"normalized", false}},
       {{"id", 1},
        {"content", "<mask>"},
        {"lstrip", true},
        {"special", true},
        {"normalized", false}},
       {{"id", 2}, {"content", "New York"}, {"single_word", true}},
       {{"id", 3}, {"content", "[RAW]"}, {"rstrip", true}, {"normalized", false}}});
}

std::unique_ptr<HfTokenizer> WordPiece() {
  nlohmann::json vocab = {{"[UNK]", 0}, {"[CLS]", 1}, {"[SEP]", 2}};
  for (char c = '!'; c <= '~'; ++c) {
    vocab[std::string(1, c)] = vocab.size();
    vocab["##" + std::string(1, c)] = vocab.size();
  }
  for (const char* w : {"hello", "world", "\xE4\xB8\xAD", "caf", "##\xC3\xA9", "##ing"}) {
    vocab[w] = vocab.size();
  }
  nlohmann::json j = {{"added_tokens", Added()},
                      {"normalizer", {{"type", "BertNormalizer"}, {"lowercase", true}}},
                      {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
                      {"model",
                       {{"type", "WordPiece"},
                        {"unk_token", "[UNK]"},
                        {"vocab", vocab},
                        {"max_input_chars_per_word", 20}}},
                      {"post_processor",
                       {{"type", "BertProcessing"}, {"cls", {"[CLS]", 1}}, {"sep", {"[SEP]", 2}}}}};
  return Load(j);
}

std::unique_ptr<HfTokenizer> ByteLevelBpe() {
  nlohmann::json vocab = nlohmann::json::object();
  auto piece = [](const std::string& s) {
    std::string out;
    for (unsigned char c : s) infer::text::AppendUtf8(infer::text::ByteToChar(c), &out);
    return out;
  };
  for (int b = 0; b < 256; ++b) vocab[piece(std::string(1, static_cast<char>(b)))] = vocab.size();
  nlohmann::json merges = nlohmann::json::array();
  const std::pair<const char*, const char*> pairs[] = {
      {" ", "t"}, {"h", "e"}, {" t", "he"}, {"i", "n"}, {"in", "g"}, {" ", "a"}, {"\xE4", "\xB8"}};
  for (const auto& [a, b] : pairs) {
    const std::string merged = piece(std::string(a) + b);
    if (!vocab.contains(merged)) vocab[merged] = vocab.size();
    merges.push_back({piece(a), piece(b)});
  }
  const char* qwen =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  nlohmann::json j = {
      {"added_tokens", Added()},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", qwen}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"ignore_merges", true}}},
      {"post_processor",
       {{"type", "Sequence"},
        {"processors",
         {{{"type", "ByteLevel"}, {"trim_offsets", true}},
          {{"type", "TemplateProcessing"},
           {"single",
            {{{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
             {{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}}}},
           {"pair",
            {{{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
             {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
           {"special_tokens",
            {{"[CLS]", {{"id", "[CLS]"}, {"ids", {0}}, {"tokens", {"[CLS]"}}}}}}}}}}}};
  return Load(j);
}

std::unique_ptr<HfTokenizer> Unigram() {
  // Entries spelled json::array: an initializer list of string-first pairs
  // would make an object.
  using J = nlohmann::json;
  J vocab = J::array(
      {J::array({"<unk>", 0.0}), J::array({"<s>", 0.0}), J::array({"\xE2\x96\x81", -2.0})});
  for (char c = 'a'; c <= 'z'; ++c)
    vocab.push_back(J::array({std::string(1, c), -3.0 - (c - 'a') * 0.1}));
  for (const char* w : {"\xE2\x96\x81the",
                        "\xE2\x96\x81"
                        "a",
                        "ing", "\xE4\xB8\xAD", "\xE6\x96\x87"}) {
    vocab.push_back(J::array({w, -1.5}));
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab.push_back(J::array({name, -20.0}));
  }
  nlohmann::json j = {
      {"added_tokens", Added()},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "NFKC"}},
          {{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}},
          {{"type", "Strip"}, {"strip_left", false}, {"strip_right", true}}}}}},
      {"pre_tokenizer",
       {{"type", "Metaspace"},
        {"replacement", "\xE2\x96\x81"},
        {"prepend_scheme", "first"},
        {"split", true}}},
      {"model", {{"type", "Unigram"}, {"unk_id", 0}, {"vocab", vocab}, {"byte_fallback", true}}},
      {"post_processor",
       {{"type", "RobertaProcessing"},
        {"cls", {"<s>", 1}},
        {"sep", {"<s>", 1}},
        {"trim_offsets", false}}}};
  return Load(j);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto* tokenizers =
      new std::unique_ptr<HfTokenizer>[3] { WordPiece(), ByteLevelBpe(), Unigram() };
  if (size < 1) return 0;
  const uint8_t control = data[0];
  const HfTokenizer& t = *tokenizers[control % 3];
  absl::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  std::optional<absl::string_view> pair;
  if (control & 4) {
    const size_t zero = text.find('\0');
    if (zero != absl::string_view::npos) {
      pair = text.substr(zero + 1);
      text = text.substr(0, zero);
    }
  }
  infer::text::EncodeOptions options;
  options.char_offsets = (control & 8) != 0;
  if (control & 16) {
    infer::text::Truncation tr;
    tr.max_length = (control >> 5) * 3;
    tr.left = (control & 32) != 0;
    tr.strategy = pair.has_value() && (control & 64)
                      ? infer::text::TruncationStrategy::kOnlySecond
                      : infer::text::TruncationStrategy::kLongestFirst;
    options.truncation = tr;
  }
  auto e = t.Encode(text, pair, options);
  // The serving path (ids alone) agrees with the whole encoding.
  if (!pair.has_value()) {
    auto ids = t.EncodeIds(text, options.truncation);
    if (ids.ok() != e.ok() || (ids.ok() && *ids != e->ids)) __builtin_trap();
  }
  const bool valid = infer::text::ValidUtf8(text) && (!pair || infer::text::ValidUtf8(*pair));
  if (!e.ok()) {
    if (e.status().code() != absl::StatusCode::kInvalidArgument) __builtin_trap();
    if (valid && !options.truncation.has_value()) __builtin_trap();  // only bad text or truncation
    return 0;
  }
  if (!valid) __builtin_trap();
  const size_t n = e->ids.size();
  if (e->type_ids.size() != n || e->tokens.size() != n || e->offsets.size() != n ||
      e->special_tokens_mask.size() != n || e->sequence_ids.size() != n) {
    __builtin_trap();
  }
  if (options.truncation.has_value() && n > options.truncation->max_length) __builtin_trap();
  for (size_t i = 0; i < n; ++i) {
    if (e->ids[i] < 0 || e->ids[i] >= t.vocab_size()) __builtin_trap();
    const size_t limit = e->sequence_ids[i] == 1 ? pair->size() : text.size();
    if (e->offsets[i].start > e->offsets[i].end || e->offsets[i].end > limit) __builtin_trap();
  }
  return 0;
}
