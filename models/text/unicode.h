// Character properties and per-character normalisation, with the meanings
// Hugging Face `tokenizers` gives them (Rust's `char` methods and the
// unicode-normalization crate), so a tokenizer.json pipeline splits and
// normalises text exactly as the original does.
//
// Every property comes from ICU (Debian's libicu 72, Unicode 15.0), not
// from tables written here: ICU is the one maintained library that has all
// of them, including the per-character primitives normalisation with offset
// tracking needs (full decomposition of one code point, the canonical
// combining class, and the composition of a pair), which utf8proc does not
// expose. Characters assigned after Unicode 15.0 may be classified as
// unassigned here while a newer Rust knows them.
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

// Properties (Rust's meanings, noted where they differ from the names).
bool IsWhitespace(char32_t c);        // White_Space
bool IsAlphabetic(char32_t c);        // Alphabetic
bool IsNumeric(char32_t c);           // general category Nd, Nl or No
bool IsPunctuation(char32_t c);       // general category P*
bool IsAsciiPunctuation(char32_t c);  // ASCII graphic, neither letter nor digit
bool IsOther(char32_t c);             // Cc, Cf, Cs, Co or Cn (unassigned)
bool IsMarkNonspacing(char32_t c);    // Mn
bool IsCombiningMark(char32_t c);     // M* (Mn, Mc, Me)
bool IsWordChar(char32_t c);          // regex \w: Alphabetic, M*, Nd, Pc, Join_Control

// Full lower-case mapping of one code point (Rust's char::to_lowercase:
// one to three code points, no context), appended to out.
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
