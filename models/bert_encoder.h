// BertEncoder: the BERT encoder forward pass on one device, with mean pooling
// over the attention mask and optional L2 normalisation — the
// sentence-transformers recipe of all-MiniLM-L6-v2 and its family.
//
//   x = LayerNorm(word[ids] + position[0..S) + token_type[0])
//   per layer: x = LayerNorm(x + Wo · MultiHeadAttention(x, mask))
//              x = LayerNorm(x + W2 · GELU(W1 · x))        (GELU: erf form)
//   embedding[b] = mean of x[b, s] over s with mask[b, s] = 1   (mean pooling)
//              or x[b, 0], the [CLS] token's state               (CLS pooling)
//
// Two implementations: FP32 on the CPU with OpenBLAS (models/bert_cpu.h) and
// FP16 storage / FP32 accumulation on CUDA with cuBLAS and fused kernels
// (models/bert_cuda.h). Both take their activations from the device
// context's caching allocator on the stream they are given, so PeakBytes can
// be checked against the allocator's measured peak.
//
// Thread-safety: immutable after loading; Encode may run concurrently on
// different streams.
#ifndef INFER_MODELS_BERT_ENCODER_H_
#define INFER_MODELS_BERT_ENCODER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/checkpoint.h"
#include "runtime/device_context.h"

namespace infer {

// The weights of a BERT encoder in host memory (FP32), as Hugging Face
// stores them: Linear weights are [out, in].
struct BertWeights {
  struct Linear {
    std::vector<float> w;  // [out, in]
    std::vector<float> b;  // [out]
    int64_t out = 0, in = 0;
  };
  struct Norm {
    std::vector<float> gamma, beta;
  };
  struct Layer {
    Linear q, k, v, attn_out, ffn_in, ffn_out;
    Norm attn_norm, ffn_norm;
  };
  BertConfig config;
  std::vector<float> word, position, token_type;  // [vocab|positions|types, hidden]
  Norm embed_norm;
  std::vector<Layer> layers;

  int64_t ParameterCount() const;
};

// Reads `dir`/config.json and `dir`/model.safetensors. INVALID_ARGUMENT naming
// the file and tensor when one is missing or has the wrong shape.
absl::StatusOr<BertWeights> LoadBertWeights(const std::string& dir);

enum class BertPooling { kMean, kCls };

class BertEncoder {
 public:
  virtual ~BertEncoder() = default;

  virtual const BertConfig& config() const = 0;
  // Bytes the weights occupy on the device (by allocator block).
  virtual int64_t WeightBytes() const = 0;
  // Bytes Encode draws from the allocator for `rows` sequences of `length`
  // tokens (activations and workspace, by allocator block), not counting the
  // caller's ids, mask and output.
  virtual int64_t PeakBytes(int64_t rows, int64_t length) const = 0;
  // Enqueues the forward pass on `stream`. `ids` and `mask` are [batch, seq]
  // INT64 in device memory (ids already validated, mask 0/1); `out` is
  // [batch, hidden] FP32 device memory. Scratch memory is returned to the
  // allocator on `stream` before this returns (stream-ordered reuse).
  virtual absl::Status Encode(Stream* stream, const int64_t* ids, const int64_t* mask,
                              int64_t batch, int64_t seq, BertPooling pooling, bool normalize,
                              float* out) const = 0;
};

// Loads `dir` (config.json, model.safetensors; Hugging Face layout, with or
// without the "bert." prefix) for `context`'s device: the CPU encoder, or the
// CUDA one when the build has CUDA. INVALID_ARGUMENT naming the file and
// tensor when one is missing or has the wrong shape.
absl::StatusOr<std::unique_ptr<BertEncoder>> LoadBertEncoder(const std::string& dir,
                                                             const DeviceContext& context);

}  // namespace infer

#endif  // INFER_MODELS_BERT_ENCODER_H_
