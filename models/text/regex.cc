#include "models/text/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "absl/strings/str_cat.h"
#include "models/text/regex_classes.h"
#include "models/text/unicode.h"

namespace infer::text {

absl::StatusOr<std::unique_ptr<Regex>> Regex::Compile(absl::string_view pattern) {
  int error = 0;
  PCRE2_SIZE at = 0;
  // Oniguruma's classes as explicit ranges (regex_classes.h), so that
  // PCRE2's own Unicode tables decide nothing they name.
  const std::string expanded = ExpandClasses(pattern);
  // UTF: patterns and subjects are UTF-8 (subjects are checked once at the
  // tokenizer's entry, hence NO_UTF_CHECK when matching). UCP: what is left
  // to PCRE2's tables (\b, POSIX classes, scripts) uses Unicode properties,
  // as Oniguruma's does.
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(expanded.data()), expanded.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &at, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return absl::InvalidArgumentError(absl::StrCat("regex \"", pattern, "\" does not compile at ",
                                                   at, ": ", reinterpret_cast<char*>(message)));
  }
  // The JIT is an optimisation: without it (e.g. no executable memory) the
  // interpreter gives the same matches.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  std::unique_ptr<Regex> re(new Regex());
  re->pattern_ = std::string(pattern);
  re->code_ = code;
  return re;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

std::vector<std::pair<size_t, size_t>> Regex::FindAll(absl::string_view s) const {
  std::vector<std::pair<size_t, size_t>> out;
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* data = pcre2_match_data_create_from_pattern(code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t pos = 0;
  while (pos <= s.size()) {
    const int rc = pcre2_match(code, subject, s.size(), pos, PCRE2_NO_UTF_CHECK, data, nullptr);
    if (rc < 0) break;  // no match (or a matching limit: the rest is unmatched)
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data);
    const size_t start = ov[0];
    const size_t end = ov[1];
    out.emplace_back(start, end);
    if (end > start) {
      pos = end;
    } else {
      if (end >= s.size()) break;
      size_t next = end;
      DecodeUtf8(s, &next);  // one character on
      pos = next;
    }
  }
  pcre2_match_data_free(data);
  return out;
}

}  // namespace infer::text
