// Oniguruma's character classes for PCRE2: tokenizer.json's Split and
// Replace patterns are Oniguruma syntax, matched by `tokenizers` with
// Oniguruma's Unicode tables, which are not PCRE2's (another Unicode
// version, and Oniguruma's \h is a hexadecimal digit where PCRE2's is
// horizontal space). ExpandClasses rewrites \p{X}, \P{X}, \p{^X}
// (general categories: the 29 two-letter ones, L M N P S Z C, LC and L&),
// \s \S \w \W \d \D \h \H, inside and outside brackets, into classes with
// exactly the members generated from `tokenizers` itself (unicode_tables.h):
// PCRE2's own property and the code points it lacks where it has none too
// many (\p{L}: 35 ranges more), else explicit code point ranges. Which is
// found once per escape and process by matching PCRE2's own escape over
// every code point (about 10 ms). Other escapes and property names
// (scripts) are left to PCRE2.
// Thread-safe (the class bodies are built once, on first use).
#ifndef INFER_MODELS_TEXT_REGEX_CLASSES_H_
#define INFER_MODELS_TEXT_REGEX_CLASSES_H_

#include <string>

#include "absl/strings/string_view.h"

namespace infer::text {

// `pattern` with the classes above as bracketed ranges (their contents alone
// inside a bracket); the rest byte for byte.
std::string ExpandClasses(absl::string_view pattern);

}  // namespace infer::text

#endif  // INFER_MODELS_TEXT_REGEX_CLASSES_H_
