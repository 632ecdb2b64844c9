#include "models/identity/identity.h"

#include <vector>

namespace infer {
namespace {

class IdentityBatch final : public ModelBatch {
 public:
  explicit IdentityBatch(std::vector<const Tensor*> inputs) : inputs_(std::move(inputs)) {}
  absl::Status Upload(Stream*) override { return absl::OkStatus(); }
  absl::Status Compute(Stream*) override { return absl::OkStatus(); }
  absl::Status Download(Stream*) override { return absl::OkStatus(); }
  absl::Status Finish(absl::Span<InferResponse* const> responses) override {
    for (size_t i = 0; i < responses.size(); ++i) {
      Tensor out = *inputs_[i];  // the requests outlive the batch (see ModelBatch)
      out.name = "output_ids";
      responses[i]->outputs.push_back(std::move(out));
    }
    return absl::OkStatus();
  }

 private:
  const std::vector<const Tensor*> inputs_;
};

}  // namespace

IdentityModel::IdentityModel(const std::string& name) {
  spec_.name = name;
  spec_.platform = "infer_identity";
  spec_.backend = "identity";
  spec_.inputs = {{"input_ids",
                   DataType::kInt64,
                   {-1, -1},
                   /*optional=*/false,
                   /*accepts_int32=*/true}};
  spec_.outputs = {{"output_ids", DataType::kInt64, {-1, -1}}};
}

absl::StatusOr<std::unique_ptr<ModelBatch>> IdentityModel::Prepare(
    absl::Span<const InferRequest* const> requests) {
  std::vector<const Tensor*> inputs;
  inputs.reserve(requests.size());
  for (const InferRequest* r : requests) inputs.push_back(&r->inputs.front());
  return std::unique_ptr<ModelBatch>(new IdentityBatch(std::move(inputs)));
}

}  // namespace infer
