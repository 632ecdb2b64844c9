// Parsing JSON that a client sent (or a file holds) with its nesting depth
// bounded, and quoting a parsed value in an error message without
// serialising it whole.
//
// Why: nlohmann::json parses without recursion, but much of what is done
// with a parsed value recurses on its nesting: dump(), comparison, copies,
// and any walk of our own. A body of a few hundred kilobytes can nest arrays
// a million deep ("[[[[...") and overflow the stack of whatever walks it.
// ParseJson counts the depth while it parses (a SAX handler around
// nlohmann's own DOM builder) and stops at the first array or object that
// opens past the limit, so no value deeper than the limit is ever built and
// nothing after it is read.
//
// Thread-safe (no shared state).
#ifndef INFER_RUNTIME_JSON_PARSE_H_
#define INFER_RUNTIME_JSON_PARSE_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infer {

// The deepest nesting of arrays and objects a document may have: a
// top-level object is depth 1. KServe's "data" may nest as deep as a
// tensor's rank (at most 32 here) inside inputs[i] of the body (3 more);
// nothing a client legitimately sends comes close to 64.
inline constexpr int kMaxJsonDepth = 64;

// `text` parsed. INVALID_ARGUMENT "<what> is not valid JSON (at byte N)",
// or "<what> nests arrays and objects deeper than <max_depth> levels (the
// server's limit)" as soon as the first array or object past the limit
// opens, whatever follows it.
absl::StatusOr<nlohmann::json> ParseJson(absl::string_view text, absl::string_view what,
                                         int max_depth = kMaxJsonDepth);

// The file at `path` parsed as above (named by its path in errors); nullopt
// when it does not exist or cannot be opened (a model folder's optional
// files: tokenizer_config.json, sentence_bert_config.json, ...).
absl::StatusOr<std::optional<nlohmann::json>> ParseOptionalJsonFile(const std::string& path);

// A parsed value for an error message, bounded whatever its size: numbers,
// booleans and null as JSON writes them, a string quoted (Quote, so cut
// after a prefix), an array or object described by its size ("an array of
// 3 values", "an object of 2 members") and never serialised.
std::string QuoteJson(const nlohmann::json& value);

}  // namespace infer

#endif  // INFER_RUNTIME_JSON_PARSE_H_
