// A KServe v2 REST inference request (POST /v2/models/{m}/infer) through
// what the route does to it before it is queued: ParseRestInferRequest (the
// depth-bounded JSON, tensors as JSON data or Triton's binary data
// extension) and DecodeInferRequest, then admission. Whatever the bytes: a
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
#include "server/grpc_decode.h"
#include "server/http_infer_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  infer::fuzzing::Served& served = infer::fuzzing::ServedModels();
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  const absl::string_view header =
      newline == absl::string_view::npos ? absl::string_view() : input.substr(0, newline);
  const absl::string_view body =
      newline == absl::string_view::npos ? input : input.substr(newline + 1);
  for (const char* model : {"ids", "text"}) {
    absl::StatusOr<infer::RestInferRequest> parsed =
        infer::ParseRestInferRequest(model, "", std::string(body), header);
    if (!parsed.ok()) return 0;  // the same for both models
    absl::StatusOr<infer::InferRequest> request =
        infer::DecodeInferRequest(*served.engine, &parsed->proto);
    if (request.ok()) infer::fuzzing::AdmitServed(*std::move(request));
  }
  return 0;
}
