// Quoting strings a client sent (model, input, output and health service
// names, versions, datatypes) in error messages, bounded.
//
// A message that quotes a client string whole can be made as large as the
// client likes. gRPC carries a status message in a header, and a client
// refuses headers over its metadata limit (16 KiB by default in gRPC C++),
// so an error naming a 1 MiB model name would reach the client as
// RESOURCE_EXHAUSTED "Stream removed" instead of NOT_FOUND. Every client
// string in a message therefore goes through Quote():
//
//   Quote("minilm")        -> 'minilm'
//   Quote(1 MiB of 'a')    -> 'aa…aa…' (1048576 bytes)   (the first 64 kept)
//
// The kept prefix never splits a UTF-8 sequence, and control characters,
// quotes, backslashes and invalid UTF-8 bytes are C-escaped, so a message
// stays one printable line whatever the client sent. A quoted string is at
// most about 4 × kQuotePrefixBytes + 32 bytes long.
#ifndef INFER_RUNTIME_QUOTE_H_
#define INFER_RUNTIME_QUOTE_H_

#include <cstddef>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"

namespace infer {

// How many bytes of a long client string a message keeps.
inline constexpr size_t kQuotePrefixBytes = 64;

// `s` in single quotes, escaped; past kQuotePrefixBytes cut (at a UTF-8
// character boundary), with "…" and the full length in bytes after it.
std::string Quote(absl::string_view s);

// The longest a status message sent to a client may be.
inline constexpr size_t kMaxStatusMessageBytes = 1024;

// `message` as it is when it fits kMaxStatusMessageBytes; else cut (at a
// UTF-8 character boundary) with "… (N bytes, cut)" after it, within the
// limit. The last guard before a message leaves the server (status_map.h,
// stream error messages), for a message some future code built unbounded.
std::string BoundedMessage(absl::string_view message);

// Runs `check(what)`, a deterministic check whose error message starts with
// the subject `what` (e.g. "input 'ids'"), first with an empty subject, and
// only when that fails again with `subject()`. The subject, which quotes a
// client string, is then built on the error path alone: checks that run for
// every request pass without allocating it. `check` returns absl::Status or
// absl::StatusOr<T>; so does CheckNamed.
template <typename Check, typename Subject>
auto CheckNamed(Check&& check, Subject&& subject) -> decltype(check(absl::string_view())) {
  auto result = check(absl::string_view());
  if (result.ok()) return result;
  return check(std::forward<Subject>(subject)());
}

}  // namespace infer

#endif  // INFER_RUNTIME_QUOTE_H_
