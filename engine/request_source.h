// RequestSource: a request as a front end received it, still in its wire
// form, handed to the engine's one entry point, Engine::Submit(RequestSource&,
// done). Every front end (gRPC, KServe REST, OpenAI) and the in-process API
// (InferRequestSource) go through it, so every request makes the same walk:
//
//   1. the engine looks the model up, once, by model_name();
//   2. Declare says what the client declared (inputs' names and shapes, the
//      bytes of text), before any contents are decoded;
//   3. the engine checks the model's request limits on that, once
//      (engine/request_limits.h): nothing proportional to a declared size
//      has been allocated yet;
//   4. Decode fills the engine's InferRequest (contents, id, outputs,
//      scheduling);
//   5. the engine admits it (engine/request_admission.h) and queues it.
//
// A refusal at any step is answered through the done callback and counted in
// the model's statistics: a Declare or Decode error as `invalid`, a limit as
// `over_limit`. Declare and Decode are called at most once each, in that
// order, on the thread that calls Submit and before Submit returns; the
// engine does not use the source after Submit returns.
#ifndef INFER_ENGINE_REQUEST_SOURCE_H_
#define INFER_ENGINE_REQUEST_SOURCE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "models/model.h"

namespace infer {

// What a request declares before its contents are decoded. The names and
// shapes are views into the source, valid until its Decode returns.
struct DeclaredRequest {
  std::vector<DeclaredInput> inputs;
  // Bytes of all BYTES (text) inputs, in the 4-byte-length layout
  // (runtime/tensor.h), checked against max_text_bytes.
  int64_t text_bytes = 0;
};

class RequestSource {
 public:
  virtual ~RequestSource() = default;
  // The model the request names.
  virtual const std::string& model_name() const = 0;
  // Fills *declared. `spec` is the model's; a source may refuse here what
  // it can tell without decoding (e.g. a model version that does not exist).
  virtual absl::Status Declare(const ModelSpec& spec, DeclaredRequest* declared) = 0;
  // Decodes the request into *request, whose model_name the engine sets.
  virtual absl::Status Decode(const ModelSpec& spec, InferRequest* request) = 0;
};

// A request already in the engine's form (the in-process API): declares its
// tensors' shapes and the bytes of its BYTES tensors, and decodes by moving
// the request out.
class InferRequestSource final : public RequestSource {
 public:
  explicit InferRequestSource(InferRequest request) : request_(std::move(request)) {}
  const std::string& model_name() const override { return request_.model_name; }
  absl::Status Declare(const ModelSpec& spec, DeclaredRequest* declared) override;
  absl::Status Decode(const ModelSpec& spec, InferRequest* request) override;

 private:
  InferRequest request_;
};

}  // namespace infer

#endif  // INFER_ENGINE_REQUEST_SOURCE_H_
