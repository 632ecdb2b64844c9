// The API key a server may be started with (--api-key, --api-key-file or
// the API_KEY environment variable, as TEI's router takes it), the check
// of a request's credentials against it, and the count of the requests
// refused, by front end, for /metrics (infer_unauthenticated_requests_total).
//
// A request carries the key as TEI's, OpenAI's and Cohere's clients send
// one: HTTP `Authorization: Bearer KEY`, gRPC metadata `authorization:
// Bearer KEY`. The comparison takes the same time wherever the two first
// differ (a timing side channel would let a client find the key byte by
// byte); the key itself is never logged, counted or put in an error.
//
// Which routes need it is the front ends' to say (server/http/route_table.h,
// server/grpc/grpc_server.cc): everything that touches a model, not the
// health checks load balancers and orchestrators probe, nor /metrics.
//
// Thread-safe: the key is constant, the counters atomic.
#ifndef INFER_SERVER_API_KEY_H_
#define INFER_SERVER_API_KEY_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infer {

class ApiKey {
 public:
  enum Frontend { kHttp = 0, kGrpc = 1, kFrontends = 2 };

  // The key from the flags: `key` itself, or the first line of the file
  // `key_file` (trailing whitespace and the newline removed). Neither: a
  // server with no key (every request passes). INVALID_ARGUMENT when both
  // are given or the key is empty or has characters a header cannot carry;
  // NOT_FOUND naming the file when it cannot be read.
  static absl::StatusOr<ApiKey> FromFlags(const std::string& key, const std::string& key_file);
  explicit ApiKey(std::string key = "") : expected_("Bearer " + key), enabled_(!key.empty()) {}
  ApiKey(const ApiKey& other) : expected_(other.expected_), enabled_(other.enabled_) {}

  bool enabled() const { return enabled_; }
  // Whether `authorization` (the header's or the metadata's value) is
  // "Bearer KEY" (the scheme in any case, as RFC 7235 allows). Always true
  // without a key.
  bool Allows(absl::string_view authorization) const;
  // A request refused for its credentials, and how many were.
  void CountRefusal(Frontend frontend) const;
  int64_t refusals(Frontend frontend) const;

 private:
  const std::string expected_;  // "Bearer KEY"
  const bool enabled_;
  mutable std::atomic<int64_t> refusals_[kFrontends] = {0, 0};
};

}  // namespace infer

#endif  // INFER_SERVER_API_KEY_H_
