// Character properties and per-character normalisation, with the meanings
// Hugging Face `tokenizers` gives them, for every code point (assigned,
// unassigned or private use), so a tokenizer.json pipeline splits and
// normalises text exactly as the original does.
//
// `tokenizers` takes its properties from several libraries, each at its own
// Unicode version: Rust's std (is_whitespace, is_numeric, to_lowercase), the
// unicode_categories crate (BertNormalizer's control test and nonspacing
// marks, BERT's punctuation), the regex crate (\w and \s of the Whitespace
// pre-tokenizer and of added tokens' single_word/lstrip/rstrip) and
// unicode-normalization-alignments (NFD/NFKD/NFC/NFKC, StripAccents' marks).
// Every property below is a table generated from `tokenizers` itself, code
// point by code point (unicode_tables.h, models/tools/make_unicode_tables.py).
// Normalisation takes the data (full decompositions, canonical combining
// classes, compositions of pairs) from ICU (Debian's libicu 72, Unicode 15.0)
// except for the code points the generated table says `tokenizers`'
// normalisation does not know: those stay as they are (no decomposition,
// class 0, no composition), as there.
//
// UTF-8 helpers assume valid UTF-8: text is checked once, at the entry
// (ValidUtf8), and every string built afterwards is valid by construction.
#ifndef INFER_MODELS_TEXT_UNICODE_H_
#define INFER_MODELS_TEXT_UNICODE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace infer::text {

// UTF-8.
bool ValidUtf8(absl::string_view s);
// The code point at s[*i], advancing *i past it. s must be valid UTF-8.
char32_t DecodeUtf8(absl::string_view s, size_t* i);
// Bytes of c in UTF-8 (1..4).
int Utf8Length(char32_t c);
// Bytes of the character whose first byte is `lead` (valid UTF-8).
inline size_t Utf8LengthFromLead(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}
void AppendUtf8(char32_t c, std::string* out);
// Code points in s (valid UTF-8).
size_t CountChars(absl::string_view s);

// Properties, each as the part of `tokenizers` named uses it.
bool IsWhitespace(char32_t c);        // char::is_whitespace (Strip, WhitespaceSplit, BERT)
bool IsRegexSpace(char32_t c);        // the regex crate's \s (Whitespace, added tokens)
bool IsWordChar(char32_t c);          // the regex crate's \w (Whitespace, single_word)
bool IsNumeric(char32_t c);           // char::is_numeric (Digits)
bool IsBertPunctuation(char32_t c);   // ASCII punctuation or unicode_categories' P*
bool IsAsciiPunctuation(char32_t c);  // ASCII graphic, neither letter nor digit
bool IsBertRemoved(char32_t c);       // BertNormalizer's clean_text removes it
bool IsChineseChar(char32_t c);       // BertNormalizer's CJK ideograph blocks
bool IsMarkNonspacing(char32_t c);    // unicode_categories' Mn (after NFD)
bool IsCombiningMark(char32_t c);     // the normalisation crate's M* (StripAccents)

// Full lower-case mapping of one code point (Rust's char::to_lowercase:
// one to three code points, no context; generated), appended to out.
void AppendLowercase(char32_t c, std::vector<char32_t>* out);

// A character of a normalised sequence with its `change` relative to the
// input, in Hugging Face's NormalizedString::transform convention: 0 replaces
// the input character at this position, +1 is inserted, -n replaces it and
// removes the n input characters after it.
struct CharChange {
  char32_t c;
  int change;
};

enum class NormalForm { kNfd, kNfkd, kNfc, kNfkc };
// `in` normalised to `form`, each output character tagged with its change
// (decomposition: the first character of a decomposed one replaces it and
// the rest are inserted; composition: a composed character replaces the
// first and removes the rest), as unicode-normalization-alignments does.
std::vector<CharChange> Normalize(const std::vector<char32_t>& in, NormalForm form);
// Whether `s` (valid UTF-8) is in `form` already, so that Normalize would
// give every character back unchanged (change 0): ICU's quick check, the
// shortcut that keeps normalising cheap for text that needs none.
bool IsNormalized(absl::string_view s, NormalForm form);

}  // namespace infer::text

#endif  // INFER_MODELS_TEXT_UNICODE_H_
