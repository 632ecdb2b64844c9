#include "server/api_key.h"

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "runtime/quote.h"

namespace infer {

absl::StatusOr<ApiKey> ApiKey::FromFlags(const std::string& key, const std::string& key_file) {
  if (!key.empty() && !key_file.empty()) {
    return absl::InvalidArgumentError("--api-key and --api-key-file: give one of them");
  }
  std::string k = key;
  if (!key_file.empty()) {
    std::ifstream in(key_file);
    if (!in)
      return absl::NotFoundError(
          absl::StrCat("--api-key-file ", Quote(key_file), ": cannot be read"));
    std::getline(in, k);
    k = std::string(absl::StripTrailingAsciiWhitespace(k));
    if (k.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--api-key-file ", Quote(key_file), ": its first line is empty"));
    }
  }
  for (const char c : k) {
    // What an HTTP header value and gRPC ASCII metadata carry (visible
    // ASCII); a space would end the Bearer token.
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(
          "the API key may hold visible ASCII characters only (no spaces or control characters)");
    }
  }
  return ApiKey(k);
}

bool ApiKey::Allows(absl::string_view authorization) const {
  if (!enabled_) return true;
  // The scheme is case-insensitive (RFC 7235); the token is compared over
  // the expected length whatever the given one, so the time taken says
  // nothing about where the two differ.
  constexpr size_t kScheme = 7;  // "Bearer "
  unsigned diff = authorization.size() == expected_.size() ? 0u : 1u;
  for (size_t i = 0; i < expected_.size(); ++i) {
    const char got = i < authorization.size() ? authorization[i] : '\0';
    const char want = expected_[i];
    diff |= static_cast<unsigned char>(
        i < kScheme ? absl::ascii_tolower(got) ^ absl::ascii_tolower(want) : got ^ want);
  }
  return diff == 0;
}

void ApiKey::CountRefusal(Frontend frontend) const {
  refusals_[frontend].fetch_add(1, std::memory_order_relaxed);
}

int64_t ApiKey::refusals(Frontend frontend) const {
  return refusals_[frontend].load(std::memory_order_relaxed);
}

}  // namespace infer
