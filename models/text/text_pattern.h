// TextPattern: the "pattern" of a tokenizer.json Split, Replace normalizer
// or Replace decoder: {"String": literal} or {"Regex": pattern}, read once
// here for the three of them. Immutable after reading; thread-safe.
#ifndef INFER_MODELS_TEXT_TEXT_PATTERN_H_
#define INFER_MODELS_TEXT_TEXT_PATTERN_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/text/json_fields.h"
#include "models/text/normalized_string.h"
#include "models/text/regex.h"

namespace infer::text {

struct TextPattern {
  std::string literal;
  std::unique_ptr<Regex> regex;  // null: the literal

  // Where the pattern matches in `s`, as pieces covering all of it.
  std::vector<PatternPiece> Find(absl::string_view s) const {
    return regex ? FindRegexMatches(s, *regex) : FindLiteralMatches(s, literal);
  }
};

// The "pattern" field of component `type`.
inline absl::StatusOr<TextPattern> TextPatternFromJson(const nlohmann::json& j,
                                                       const std::string& type) {
  auto pattern = j.find("pattern");
  if (pattern == j.end() || !pattern->is_object()) return FieldError(type, "pattern", "an object");
  TextPattern out;
  if (auto lit = pattern->find("String"); lit != pattern->end() && lit->is_string()) {
    out.literal = lit->get<std::string>();
    return out;
  }
  if (auto re = pattern->find("Regex"); re != pattern->end() && re->is_string()) {
    auto regex = Regex::Compile(re->get<std::string>());
    if (!regex.ok()) return regex.status();
    out.regex = *std::move(regex);
    return out;
  }
  return FieldError(type, "pattern", "{\"String\": ...} or {\"Regex\": ...}");
}

}  // namespace infer::text

#endif  // INFER_MODELS_TEXT_TEXT_PATTERN_H_
