// Arbitrary bytes through the WordPiece tokenizer, as text inputs reach it:
// invalid UTF-8 must be refused with INVALID_ARGUMENT; anything else (very
// long words, CJK, accents and combining marks, control characters,
// punctuation, whitespace of every kind) tokenizes to [CLS] ... [SEP] with
// every id inside the vocabulary. The first byte picks lower-casing and the
// longest word; the vocabulary has the special tokens, ASCII letters and
// digits (whole and as ## continuations), a few words and CJK characters.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/text/wordpiece.h"

namespace {

std::unique_ptr<infer::WordPieceTokenizer> Make(bool lower_case, int max_chars_per_word) {
  std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (char c = '!'; c <= '~'; ++c) {
    vocab.push_back(std::string(1, c));
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) vocab.push_back("##" + std::string(1, c));
  }
  for (const char* w : {"the", "##ing", "hello", "world", "token", "##ize", "un", "##able",
                        "\xE4\xB8\xAD", "\xE6\x96\x87", "\xC3\xA9", "caf", "##\xC3\xA9"}) {
    vocab.push_back(w);
  }
  infer::WordPieceTokenizer::Options options;
  options.lower_case = lower_case;
  options.max_chars_per_word = max_chars_per_word;
  auto t = infer::WordPieceTokenizer::FromVocab(std::move(vocab), options);
  if (!t.ok()) abort();
  return *std::move(t);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto* tokenizers = new std::unique_ptr<infer::WordPieceTokenizer>[4] {
    Make(true, 100), Make(false, 100), Make(true, 5), Make(false, 5)
  };
  if (size < 1) return 0;
  const infer::WordPieceTokenizer& t = *tokenizers[data[0] % 4];
  const absl::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto ids = t.Encode(text);
  if (!ids.ok()) return 0;
  if (ids->size() < 2 || ids->front() != t.cls_id() || ids->back() != t.sep_id()) {
    __builtin_trap();
  }
  for (const int64_t id : *ids) {
    if (id < 0 || id >= t.vocab_size()) __builtin_trap();
  }
  return 0;
}
