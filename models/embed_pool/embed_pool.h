// embed_pool: the first built-in model. A token-embedding lookup, a dense
// layer with tanh, and mean pooling over the non-padding tokens:
//
//   x[b,s,:]  = E[input_ids[b,s], :]                  E: [vocab, hidden]
//   y[b,s,:]  = tanh(x[b,s,:] W + bias)               W: [hidden, dim]
//   embedding[b,:] = mean over s with input_ids[b,s] != pad_id of y[b,s,:]
//
// The dense layer is one GEMM over every token of the batch (oneDNN's sgemm on
// the CPU, cuBLAS on CUDA). Padding tokens do not contribute, so a sequence's
// embedding does not depend on its batch-mates or on how far it was padded.
// Weights are generated from a seed, so every replica serves identical
// results. (The transformer encoder with real checkpoints is its own model.)
//
// Inputs:  input_ids  INT64 [-1, -1]   (batch, sequence)
// Outputs: embedding  FP32  [-1, dim]
//
// Thread-safety: see Model.
#ifndef INFER_MODELS_EMBED_POOL_EMBED_POOL_H_
#define INFER_MODELS_EMBED_POOL_EMBED_POOL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/embed_pool/embed_pool_kernels.h"
#include "models/model.h"
#include "runtime/device_context.h"

namespace infer {

struct EmbedPoolOptions {
  std::string name = "embed_pool";
  int64_t vocab_size = 30522;    // token ids must be in [0, vocab_size)
  int64_t hidden_size = 64;      // embedding table width
  int64_t embedding_size = 384;  // output width
  int64_t pad_id = 0;            // token id that marks padding
  int64_t max_sequence_length = 512;
  uint64_t seed = 42;  // weights are a function of the seed only
};

class EmbedPoolModel final : public Model {
 public:
  // Generates the weights and uploads them to the context's device; all
  // device memory (weights, activations) comes from the context's allocator.
  // The context's members are borrowed and must outlive the model.
  static absl::StatusOr<std::unique_ptr<EmbedPoolModel>> Create(const EmbedPoolOptions& options,
                                                                const DeviceContext& context);

  const ModelSpec& spec() const override { return spec_; }
  absl::Status ValidateRequest(const InferRequest& request) const override;
  int64_t PeakBytes(const BatchShape& shape) const override;
  int64_t WeightBytes() const override;
  absl::StatusOr<std::unique_ptr<ModelBatch>> Prepare(
      absl::Span<const InferRequest* const> requests) override;

  const EmbedPoolOptions& options() const { return options_; }

  // Host copies of the weights, as generated (for reference checks).
  struct HostWeights {
    std::vector<float> table;  // [vocab, hidden]
    std::vector<float> dense;  // [hidden, dim]
    std::vector<float> bias;   // [dim]
  };
  static HostWeights GenerateWeights(const EmbedPoolOptions& options);

 private:
  class Batch;
  EmbedPoolModel(const EmbedPoolOptions& options, const DeviceContext& context);

  // Constant after Create.
  const EmbedPoolOptions options_;
  ModelSpec spec_;
  const DeviceContext context_;
  std::unique_ptr<EmbedPoolKernels> kernels_;
  // The weights were allocated on this stream; it must outlive them (their
  // Free records an event on it), so it is declared first.
  std::unique_ptr<Stream> weights_stream_;
  DeviceBuffer table_, dense_, bias_;
};

}  // namespace infer

#endif  // INFER_MODELS_EMBED_POOL_EMBED_POOL_H_
