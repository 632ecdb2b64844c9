// Regex: a compiled regular expression for tokenizer.json's Split and
// Replace patterns and the byte-level split, run through PCRE2 with its JIT.
//
// Why PCRE2: Hugging Face's patterns are Oniguruma syntax with Unicode
// classes (\p{L}, \p{N}) and look-ahead (GPT-2's, Qwen's and Llama 3's
// `\s+(?!\S)`), which RE2 cannot express; PCRE2 (Debian's libpcre2-8)
// supports both, in UTF mode. Oniguruma's classes (\p{L}, \s, \w, \d, \h
// ...) are rewritten into explicit ranges generated from `tokenizers` before
// compiling (regex_classes.h): PCRE2's Unicode tables are of another version.
//
// Immutable after Compile; FindAll may be called from any number of threads
// at once (each call has its own match data).
#ifndef INFER_MODELS_TEXT_REGEX_H_
#define INFER_MODELS_TEXT_REGEX_H_

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infer::text {

class Regex {
 public:
  // INVALID_ARGUMENT naming the pattern and the position of the error.
  static absl::StatusOr<std::unique_ptr<Regex>> Compile(absl::string_view pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Byte ranges of the non-overlapping matches in `s` (valid UTF-8), left to
  // right. After an empty match the search goes on one character further,
  // as Oniguruma's does.
  std::vector<std::pair<size_t, size_t>> FindAll(absl::string_view s) const;

  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8
};

}  // namespace infer::text

#endif  // INFER_MODELS_TEXT_REGEX_H_
