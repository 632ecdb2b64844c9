// BertEncoder: the BERT encoder forward pass on one device, with mean pooling
// over the attention mask and optional L2 normalisation — the
// sentence-transformers recipe of all-MiniLM-L6-v2 and its family.
//
//   x = LayerNorm(word[ids] + position[0..S) + token_type[0])
//   per layer: x = LayerNorm(x + Wo · MultiHeadAttention(x, mask))
//              x = LayerNorm(x + W2 · GELU(W1 · x))        (GELU: erf form)
//   embedding[b] = mean of x over sequence b's real tokens        (mean pooling)
//              or x of its first real token, [CLS]                (CLS pooling)
//
// The input is a packed batch (models/packed_sequences.h): only real tokens,
// each with its position id, so no padding token reaches a GEMM and
// attention runs per sequence over its own length.
//
// Two implementations: FP32 or BF16 on the CPU with oneDNN (models/bert/bert_cpu.h)
// and FP16 storage / FP32 accumulation on CUDA with cuBLAS and fused kernels
// (models/bert/bert_cuda.h). Both take their activations from the device
// context's caching allocator on the stream they are given, so PeakBytes can
// be checked against the allocator's measured peak.
//
// Thread-safety: immutable after loading; Encode may run concurrently on
// different streams.
#ifndef INFER_MODELS_BERT_BERT_ENCODER_H_
#define INFER_MODELS_BERT_BERT_ENCODER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "batching/batch_shape.h"
#include "models/bert/bert_config.h"
#include "models/checkpoint.h"
#include "models/packed_sequences.h"
#include "models/precision.h"
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

// Q, K and V of `layer` as one [3 * hidden, hidden] linear layer: the rows
// of q, then k, then v, and their biases in the same order.
BertWeights::Linear FusedQkv(const BertWeights::Layer& layer);

// Reads `dir`/config.json and `dir`/model.safetensors. INVALID_ARGUMENT naming
// the file and tensor when one is missing or has the wrong shape.
absl::StatusOr<BertWeights> LoadBertWeights(const std::string& dir);

enum class BertPooling { kMean, kCls };

// CUDA Graphs for the CUDA encoder's small batches (models/bert/bert_cuda_graphs.h).
// Ignored on the CPU.
struct BertGraphOptions {
  bool enabled = true;
  // Batches of up to this many real tokens (and rows) replay a captured
  // graph; larger ones launch kernel by kernel. Sets the size of the graphs'
  // shared buffers.
  int64_t max_tokens = 2048;
};

struct BertEncoderOptions {
  // Resolved for the device by LoadBertEncoder (models/precision.h).
  Precision precision = Precision::kAuto;
  BertGraphOptions graphs;
  // A sequence's embedding is bit-identical whatever it is batched with
  // (models/bert/bert_cpu.h). The CPU encoder only: refused on CUDA.
  bool batch_invariant = false;
};

class BertEncoder {
 public:
  virtual ~BertEncoder() = default;

  virtual const BertConfig& config() const = 0;
  // What it computes in (never kAuto).
  virtual Precision precision() const = 0;
  // How it computes (kernels, threads), for logs.
  virtual std::string Implementation() const = 0;
  // Bytes the weights occupy on the device (by allocator block).
  virtual int64_t WeightBytes() const = 0;
  // Other bytes held from the allocator while loaded (the CUDA encoder's
  // graph buffers and capture workspace), by allocator block.
  virtual int64_t ResidentBytes() const { return 0; }
  // Bytes Encode draws from the allocator for a batch of this shape
  // (activations and workspace, by allocator block), not counting the
  // caller's packed input and output: never less than it uses for a batch
  // whose longest sequence is at most shape.length.
  virtual int64_t PeakBytes(const BatchShape& shape) const = 0;
  // Enqueues the forward pass on `stream`. `batch` is in device memory (ids
  // already validated, positions below max_position_embeddings); `out` is
  // [batch.rows, hidden] FP32 device memory. An empty sequence gets a zero
  // vector. Scratch memory is returned to the allocator on `stream` before
  // this returns (stream-ordered reuse).
  virtual absl::Status Encode(Stream* stream, const PackedSequencesView& batch, BertPooling pooling,
                              bool normalize, float* out) const = 0;
};

}  // namespace infer

#endif  // INFER_MODELS_BERT_BERT_ENCODER_H_
