// Extended grapheme clusters (Unicode Standard Annex #29, rules GB1-GB999),
// as the unicode-segmentation crate in Hugging Face `tokenizers` forms them:
// its Unicode version (17.0 for tokenizers 0.23.3) and its character
// properties, generated into unicode_tables.cc by
// models/tools/make_unicode_tables.py.
//
// SentencePiece's Precompiled normalizer (precompiled.cc) looks whole
// clusters up, so a cluster formed otherwise (ICU 72's break iterator
// follows Unicode 15.0 and does not join the marks of later versions)
// normalises differently. Written here rather than taken from ICU for that
// reason: the boundaries must be those of the version `tokenizers` follows.
//
// Thread-safe; the tables are decoded once, on first use.
#ifndef INFER_MODELS_TEXT_GRAPHEMES_H_
#define INFER_MODELS_TEXT_GRAPHEMES_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace infer::text {

// The end (a byte offset) of the grapheme cluster of `text` that starts at
// byte `start`; `text` is valid UTF-8 and start < text.size() is the first
// byte of a character.
size_t GraphemeEnd(absl::string_view text, size_t start);

}  // namespace infer::text

#endif  // INFER_MODELS_TEXT_GRAPHEMES_H_
