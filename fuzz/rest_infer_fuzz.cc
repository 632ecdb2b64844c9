// A KServe v2 REST inference request (POST /v2/models/{m}/infer) through
// what the route does to it before it is queued: its RestRequestSource
// through admission (the depth-bounded JSON, the request's structure and
// binary sizes, the declared limits, decoding JSON data or Triton's binary
// data, the checks on the decoded request). Whatever the bytes: a
// status, never a crash, a read out of bounds, deep recursion, or an
// allocation in proportion to a declared size.
//
// Input layout: the bytes before the first newline are the
// Inference-Header-Content-Length header's value (an empty one counts as
// absent, as the route reads it), the rest is the body; with no newline the
// whole input is the body. The path names the model, so each input is sent
// to both served models ("ids" and "text", fuzz/served_models.h). Run with
// -max_len of at least 1 MiB and fuzz/json.dict (scripts/fuzz.sh does).
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "fuzz/served_models.h"
#include "server/http/rest_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  infer::fuzzing::ServedModels();
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  const absl::string_view header =
      newline == absl::string_view::npos ? absl::string_view() : input.substr(0, newline);
  const absl::string_view body =
      newline == absl::string_view::npos ? input : input.substr(newline + 1);
  for (const char* model : {"ids", "text"}) {
    infer::HttpRequest request;
    request.method = "POST";
    request.body = std::string(body);
    if (!header.empty()) {
      request.headers.emplace_back("inference-header-content-length", std::string(header));
    }
    infer::RestOutputChoices choices;
    infer::RestRequestSource source(model, "", &request, &choices);
    (void)infer::fuzzing::AdmitServed(source);
  }
  return 0;
}
