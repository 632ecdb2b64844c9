// Guarded: runs model code so that an exception it throws becomes an
// INTERNAL status for the one request or batch concerned instead of taking
// the process down. Used wherever the engine calls into a Model (admission,
// Prepare, the batch stages).
#ifndef INFER_ENGINE_GUARDED_H_
#define INFER_ENGINE_GUARDED_H_

#include <exception>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace infer {

// `fn` returns absl::Status or absl::StatusOr<T>; so does Guarded.
template <typename Fn>
auto Guarded(Fn fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("exception: ", e.what()));
  }
}

}  // namespace infer

#endif  // INFER_ENGINE_GUARDED_H_
