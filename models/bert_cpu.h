// BertEncoderCpu: the BERT encoder (models/bert_encoder.h) in FP32 on the CPU,
// OpenBLAS GEMMs (multi-threaded by OpenBLAS), plain loops for the rest. It
// is also the reference the CUDA encoder is tested against.
//
// Scratch memory comes from the context's allocator when one is given (the
// served model), else from the heap (tests, benchmarks).
// Immutable after Load; Encode is thread-safe.
#ifndef INFER_MODELS_BERT_CPU_H_
#define INFER_MODELS_BERT_CPU_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "models/bert_encoder.h"

namespace infer {

class BertEncoderCpu final : public BertEncoder {
 public:
  // `allocator` may be null: scratch then comes from the heap.
  static absl::StatusOr<std::unique_ptr<BertEncoderCpu>> Load(
      const std::string& dir, CachingAllocator* allocator = nullptr);
  static std::unique_ptr<BertEncoderCpu> FromWeights(BertWeights weights,
                                                     CachingAllocator* allocator = nullptr);

  // Host-side convenience: checks the inputs (shapes, id range, length) and
  // returns [batch, hidden] embeddings.
  absl::StatusOr<std::vector<float>> Encode(absl::Span<const int64_t> ids,
                                            absl::Span<const int64_t> mask, int64_t batch,
                                            int64_t seq, bool normalize,
                                            BertPooling pooling = BertPooling::kMean) const;

  const BertConfig& config() const override { return w_.config; }
  // FP32 weights in host memory.
  int64_t WeightBytes() const override;
  int64_t PeakBytes(int64_t rows, int64_t length) const override;
  absl::Status Encode(Stream* stream, const int64_t* ids, const int64_t* mask, int64_t batch,
                      int64_t seq, BertPooling pooling, bool normalize, float* out) const override;

 private:
  BertEncoderCpu(BertWeights w, CachingAllocator* allocator)
      : w_(std::move(w)), allocator_(allocator) {}
  // y[rows, out] = x[rows, in] · W^T + b
  static void Apply(const BertWeights::Linear& l, const float* x, int64_t rows, float* y);
  void LayerNorm(const BertWeights::Norm& n, float* x, int64_t rows) const;

  BertWeights w_;
  CachingAllocator* allocator_;  // borrowed; may be null
};

}  // namespace infer

#endif  // INFER_MODELS_BERT_CPU_H_
