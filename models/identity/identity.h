// identity: answers each request with its own input — `input_ids` INT64
// [-1, -1] comes back as `output_ids` INT64 of the same shape and values. It
// does no device work (its batch stages only pass the data along on the
// host), so serving it measures what the server itself costs per request:
// protocol decoding and encoding, validation, queueing and dynamic
// batching (its batches run inline on the batcher's thread: UsesDevice is
// false). bench/frontend_overhead.py sets it against a bare gRPC echo
// server.
//
// Thread-safety: see Model.
#ifndef INFER_MODELS_IDENTITY_IDENTITY_H_
#define INFER_MODELS_IDENTITY_IDENTITY_H_

#include <memory>
#include <string>

#include "models/model.h"

namespace infer {

class IdentityModel final : public Model {
 public:
  explicit IdentityModel(const std::string& name);
  const ModelSpec& spec() const override { return spec_; }
  bool UsesDevice() const override { return false; }
  absl::StatusOr<std::unique_ptr<ModelBatch>> Prepare(
      absl::Span<const InferRequest* const> requests) override;

 private:
  ModelSpec spec_;
};

}  // namespace infer

#endif  // INFER_MODELS_IDENTITY_IDENTITY_H_
