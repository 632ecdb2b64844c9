// GoogleTest matchers for absl::Status / absl::StatusOr (Debian's Abseil has
// none): EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument, "limit"))
// and EXPECT_THAT(s, IsOk()).
#ifndef INFER_TESTS_TESTING_STATUS_MATCHERS_H_
#define INFER_TESTS_TESTING_STATUS_MATCHERS_H_

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace infer::testing {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

// Matches a status (or StatusOr) with `code` whose message contains `substr`.
MATCHER_P2(StatusIs, code, substr,
           std::string("has code ") + absl::StatusCodeToString(code) +
               " and a message containing \"" + std::string(substr) + "\"") {
  const absl::Status& s = GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return s.code() == code && s.message().find(substr) != absl::string_view::npos;
}

MATCHER(IsOk, "is OK") {
  const absl::Status& s = GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return s.ok();
}

}  // namespace infer::testing

#endif  // INFER_TESTS_TESTING_STATUS_MATCHERS_H_
