#include "runtime/quote.h"

#include <cstdio>

#include "absl/strings/str_cat.h"

namespace infer {
namespace {

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// The length of the UTF-8 sequence starting at s[i], or 0 when the bytes
// there are not one (a stray continuation byte, a bad lead byte, a truncated
// sequence, an overlong two-byte form). Written here because Debian's
// Abseil has no UTF-8 validation and absl::Utf8SafeCHexEscape passes every
// byte >= 0x80 through as it is.
size_t Utf8Length(absl::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = 0;
  if (c >= 0xC2 && c <= 0xDF)
    n = 2;
  else if (c >= 0xE0 && c <= 0xEF)
    n = 3;
  else if (c >= 0xF0 && c <= 0xF4)
    n = 4;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if (!IsContinuation(static_cast<unsigned char>(s[i + k]))) return 0;
  }
  return n;
}

// The longest prefix of `s` of at most `max` bytes that does not end inside
// a UTF-8 sequence.
absl::string_view PrefixAtBoundary(absl::string_view s, size_t max) {
  if (s.size() <= max) return s;
  size_t n = max;
  for (int i = 0; i < 3 && n > 0 && IsContinuation(static_cast<unsigned char>(s[n])); ++i) --n;
  return s.substr(0, n);
}

// Printable ASCII and valid UTF-8 as they are; quotes and backslashes
// escaped; control characters and invalid bytes as \n, \t, \r or \xNN.
void AppendEscaped(absl::string_view s, std::string* out) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      if (const size_t n = Utf8Length(s, i); n > 0) {
        out->append(s.data() + i, n);
        i += n;
        continue;
      }
    }
    switch (c) {
      case '\'':
        out->append("\\'");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\r':
        out->append("\\r");
        break;
      default:
        if (c >= 0x20 && c < 0x7F) {
          out->push_back(static_cast<char>(c));
        } else {
          char hex[5];
          std::snprintf(hex, sizeof(hex), "\\x%02x", c);
          out->append(hex);
        }
    }
    ++i;
  }
}

}  // namespace

std::string BoundedMessage(absl::string_view message) {
  if (message.size() <= kMaxStatusMessageBytes) return std::string(message);
  const std::string tail = absl::StrCat("… (", message.size(), " bytes, cut)");
  return absl::StrCat(PrefixAtBoundary(message, kMaxStatusMessageBytes - tail.size()), tail);
}

std::string Quote(absl::string_view s) {
  const absl::string_view kept = PrefixAtBoundary(s, kQuotePrefixBytes);
  std::string out = "'";
  out.reserve(kept.size() + 32);
  AppendEscaped(kept, &out);
  if (kept.size() == s.size()) {
    out.push_back('\'');
  } else {
    absl::StrAppend(&out, "…' (", s.size(), " bytes)");
  }
  return out;
}

}  // namespace infer
