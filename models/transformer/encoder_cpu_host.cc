// TransformerEncoderCpu's host-side entry points (encoder_cpu.h): checking
// and packing [batch, seq] id matrices, then Encode, HiddenStates and
// Classify over the packed batch, for tests, tools and benchmarks.
#include <algorithm>
#include <array>
#include <vector>

#include "absl/strings/str_cat.h"
#include "models/transformer/encode_on_device.h"
#include "models/transformer/encoder_cpu.h"
#include "runtime/cpu_device.h"
#include "runtime/status_macros.h"

namespace infer {

absl::StatusOr<std::vector<float>> TransformerEncoderCpu::Encode(
    absl::Span<const int64_t> ids, absl::Span<const int64_t> mask, int64_t batch, int64_t seq,
    bool normalize, Pooling pooling, absl::Span<const int64_t> types) const {
  INFER_ASSIGN_OR_RETURN(const PackedSequences packed,
                         CheckAndPackHost(spec_, ids, types, mask, batch, seq));
  std::vector<float> out(batch * spec_.hidden_size);
  INFER_RETURN_IF_ERROR(Encode(nullptr, packed.view(), pooling, normalize, out.data()));
  return out;
}

absl::StatusOr<std::vector<float>> TransformerEncoderCpu::HiddenStates(
    absl::Span<const int64_t> ids, absl::Span<const int64_t> mask, int64_t batch, int64_t seq,
    absl::Span<const int64_t> types) const {
  INFER_ASSIGN_OR_RETURN(const PackedSequences packed,
                         CheckAndPackHost(spec_, ids, types, mask, batch, seq));
  const PackedSequencesView view = packed.view();
  const int64_t rows = ComputedRows(view.tokens);
  const std::array<int64_t, kBuffers> sizes = ScratchBytes(rows, view.longest);
  std::vector<std::vector<float>> heap;
  std::array<void*, kBuffers> p{};
  for (int i = 0; i < kBuffers; ++i) {
    if (sizes[i] == 0) continue;
    heap.emplace_back((sizes[i] + sizeof(float) - 1) / sizeof(float));
    p[i] = heap.back().data();
  }
  if (view.tokens > 0) {
    UseCpuThreads(threads_);
    INFER_RETURN_IF_ERROR(Forward(view, p, rows));
  }
  const auto* x = static_cast<const float*>(p[kX]);
  return std::vector<float>(x, x + view.tokens * spec_.hidden_size);
}

absl::StatusOr<std::vector<float>> TransformerEncoderCpu::Sparse(
    absl::Span<const int64_t> ids, absl::Span<const int64_t> mask, int64_t batch, int64_t seq,
    const SpladePooling& pooling, absl::Span<const int64_t> types) const {
  if (splade_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(spec_.model_type, " encoder loaded without a masked-LM head"));
  }
  INFER_ASSIGN_OR_RETURN(const PackedSequences packed,
                         CheckAndPackHost(spec_, ids, types, mask, batch, seq));
  const PackedSequencesView view = packed.view();
  std::vector<float> states(view.tokens * spec_.hidden_size);
  INFER_RETURN_IF_ERROR(
      EncodeWithStates(nullptr, view, Pooling::kMean, false, nullptr, states.data()));
  std::vector<char> scratch(static_cast<size_t>(splade_->ScratchBytes(view.tokens)));
  std::vector<float> out(batch * splade_->vocab());
  INFER_RETURN_IF_ERROR(splade_->Run(nullptr, states.data(), view.host_offsets, view.offsets,
                                     view.rows, view.tokens, pooling, out.data(), scratch.data()));
  return out;
}

absl::StatusOr<std::vector<float>> TransformerEncoderCpu::Classify(
    absl::Span<const int64_t> ids, absl::Span<const int64_t> mask, int64_t batch, int64_t seq,
    absl::Span<const int64_t> types) const {
  if (classifier_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(spec_.model_type, " checkpoint without a classification head"));
  }
  // A decoder's head reads the last token that is not padding.
  std::vector<int64_t> read(mask.begin(), mask.end());
  if (batch >= 0 && seq >= 0 && ids.size() == static_cast<size_t>(batch * seq) &&
      (read.empty() || read.size() == ids.size())) {
    MaskTrailingPadTokens(spec_, ids.data(), batch, seq, &read);
  }
  INFER_ASSIGN_OR_RETURN(
      const std::vector<float> first,
      Encode(ids, read, batch, seq, /*normalize=*/false, ClassifierPooling(spec_), types));
  return classifier_.Apply(first.data(), batch);
}

}  // namespace infer
