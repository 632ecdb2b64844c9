// infer-tokenize: runs a Hugging Face tokenizer.json over texts read from
// stdin, one per line (with --pair, a tab separates a text from its pair),
// and writes one JSON line per text:
//   {"ids": [...], "type_ids": [...], "offsets": [[start, end], ...],
//    "tokens": [...], "special_tokens_mask": [...]}
// (with --decode also "decoded": the ids back to text, as the file's decoder
// makes it, special tokens skipped)
// or {"error": "..."} for a line that cannot be encoded (e.g. invalid UTF-8).
// --ids-only writes {"ids": [...]} alone, by the path the server takes (the
// ids without the rest of the encoding).
// Offsets are in characters, as Python's `tokenizers` reports them
// (--byte-offsets for bytes). For debugging a model's tokenization, and for
// checking it against the original from outside.
//
// --tokenizer may also name a model folder: its tokenizer as the server loads
// it (tokenizer.json, else vocab.txt; models/text/load_tokenizer.h).
//
//   infer-tokenize --tokenizer tokenizer.json|FOLDER [--pair] [--max-length N]
//                  [--truncation-side right|left]
//                  [--strategy longest_first|only_first|only_second]
//                  [--no-special-tokens] [--byte-offsets] [--decode] [--ids-only]
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "models/text/hf_tokenizer.h"
#include "models/text/load_tokenizer.h"

namespace {

using infer::text::EncodeOptions;
using infer::text::Encoding;
using infer::text::HfTokenizer;

std::string ToJson(const Encoding& e, const std::string* decoded) {
  nlohmann::json j;
  j["ids"] = e.ids;
  j["type_ids"] = e.type_ids;
  nlohmann::json offsets = nlohmann::json::array();
  for (const auto& o : e.offsets) offsets.push_back({o.start, o.end});
  j["offsets"] = std::move(offsets);
  j["tokens"] = e.tokens;
  j["special_tokens_mask"] = e.special_tokens_mask;
  if (decoded != nullptr) j["decoded"] = *decoded;
  // Tokens are valid UTF-8 except byte-level pieces cut inside a character,
  // which are written with U+FFFD rather than failing the line.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

int main(int argc, char** argv) {
  std::string path, side = "right", strategy = "longest_first";
  bool pair = false, no_special = false, byte_offsets = false, decode = false, ids_only = false;
  int64_t max_length = -1;
  CLI::App app{
      "infer-tokenize: encode texts from stdin (one per line; with --pair a tab separates the "
      "pair) with a Hugging Face tokenizer.json or a model folder's tokenizer, one JSON line per "
      "text"};
  app.add_option("--tokenizer", path,
                 "a tokenizer.json, or a model folder (its tokenizer.json, else its vocab.txt)")
      ->required();
  app.add_flag("--pair", pair, "each line is TEXT<tab>PAIR");
  app.add_option("--max-length", max_length, "truncate to this many tokens, specials included");
  app.add_option("--truncation-side", side, "right (default) or left")
      ->check(CLI::IsMember({"right", "left"}));
  app.add_option("--strategy", strategy, "truncation strategy for a pair")
      ->check(CLI::IsMember({"longest_first", "only_first", "only_second"}));
  app.add_flag("--no-special-tokens", no_special, "leave out the post-processor's special tokens");
  app.add_flag("--byte-offsets", byte_offsets, "offsets in bytes instead of characters");
  app.add_flag("--ids-only", ids_only,
               "write {\"ids\": [...]} alone, by the serving path (one text per line)");
  app.add_flag("--decode", decode,
               "add \"decoded\": the ids decoded back to text, special tokens skipped");
  CLI11_PARSE(app, argc, argv);

  // A folder: its tokenizer as the server loads it (tokenizer.json, else
  // vocab.txt with tokenizer_config.json's options); a file: that
  // tokenizer.json.
  absl::StatusOr<std::unique_ptr<HfTokenizer>> tokenizer = infer::text::LoadTokenizer(path);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "infer-tokenize: %s\n", tokenizer.status().ToString().c_str());
    return 1;
  }
  EncodeOptions options;
  options.add_special_tokens = !no_special;
  options.char_offsets = !byte_offsets;
  if (max_length >= 0) {
    infer::text::Truncation t;
    t.max_length = static_cast<size_t>(max_length);
    t.left = side == "left";
    t.strategy = strategy == "only_first"    ? infer::text::TruncationStrategy::kOnlyFirst
                 : strategy == "only_second" ? infer::text::TruncationStrategy::kOnlySecond
                                             : infer::text::TruncationStrategy::kLongestFirst;
    options.truncation = t;
  }
  std::ios::sync_with_stdio(false);
  std::string line;
  if (ids_only && (pair || no_special || decode)) {
    std::fprintf(stderr,
                 "infer-tokenize: --ids-only takes one text per line, with special tokens\n");
    return 2;
  }
  while (std::getline(std::cin, line)) {
    if (ids_only) {
      absl::StatusOr<std::vector<int32_t>> ids = (*tokenizer)->EncodeIds(line, options.truncation);
      if (ids.ok()) {
        std::cout << nlohmann::json{{"ids", *ids}}.dump() << '\n';
      } else {
        std::cout << nlohmann::json{{"error", std::string(ids.status().message())}}.dump() << '\n';
      }
      continue;
    }
    absl::StatusOr<Encoding> e;
    if (pair) {
      const size_t tab = line.find('\t');
      if (tab == std::string::npos) {
        e = absl::InvalidArgumentError("--pair: the line has no tab");
      } else {
        e = (*tokenizer)
                ->Encode(absl::string_view(line).substr(0, tab),
                         absl::string_view(line).substr(tab + 1), options);
      }
    } else {
      e = (*tokenizer)->Encode(line, std::nullopt, options);
    }
    if (e.ok()) {
      std::string decoded;
      if (decode) decoded = (*tokenizer)->Decode(e->ids, /*skip_special_tokens=*/true);
      std::cout << ToJson(*e, decode ? &decoded : nullptr) << '\n';
    } else {
      std::cout << nlohmann::json{{"error", std::string(e.status().message())}}.dump() << '\n';
    }
  }
  return 0;
}
