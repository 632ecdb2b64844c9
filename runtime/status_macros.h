// Small status helpers: Debian's Abseil (20220623) ships no status_macros.h.
#ifndef INFER_RUNTIME_STATUS_MACROS_H_
#define INFER_RUNTIME_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define INFER_CONCAT_INNER_(a, b) a##b
#define INFER_CONCAT_(a, b) INFER_CONCAT_INNER_(a, b)

// Returns from the current function if `expr` (an absl::Status) is not OK.
#define INFER_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::absl::Status infer_status_ = (expr);         \
    if (!infer_status_.ok()) return infer_status_; \
  } while (0)

// `lhs = value of expr` where expr is an absl::StatusOr<T>; returns its status
// from the current function if not OK. `lhs` may declare a variable.
#define INFER_ASSIGN_OR_RETURN(lhs, expr) \
  INFER_ASSIGN_OR_RETURN_IMPL_(INFER_CONCAT_(infer_statusor_, __LINE__), lhs, expr)
#define INFER_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

#endif  // INFER_RUNTIME_STATUS_MACROS_H_
