#include "models/transformer/encode_on_device.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "models/packed_sequences.h"
#include "models/transformer/splade_head.h"
#include "runtime/caching_allocator.h"
#include "runtime/compute_stream.h"
#include "runtime/status_macros.h"

namespace infer {

bool MaskTrailingPadTokens(const TransformerSpec& spec, const int64_t* ids, int64_t batch,
                           int64_t seq, std::vector<int64_t>* mask) {
  if (spec.labels.empty() || !spec.classifier_skips_pad) return false;
  if (mask->empty()) mask->assign(static_cast<size_t>(batch * seq), 1);
  bool changed = false;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t* row = ids + b * seq;
    int64_t* m = mask->data() + b * seq;
    int64_t first = -1, keep = -1;  // the first real token; the last real non-pad one
    for (int64_t t = 0; t < seq; ++t) {
      if (m[t] == 0) continue;
      if (first < 0) first = t;
      if (row[t] != spec.pad_token_id) keep = t;
    }
    if (first < 0) continue;  // an empty row stays empty
    if (keep < 0) keep = first;
    for (int64_t t = keep + 1; t < seq; ++t) {
      changed = changed || m[t] != 0;
      m[t] = 0;
    }
  }
  return changed;
}

absl::StatusOr<PackedSequences> CheckAndPackHost(const TransformerSpec& spec,
                                                 absl::Span<const int64_t> ids,
                                                 absl::Span<const int64_t> types,
                                                 absl::Span<const int64_t> mask, int64_t batch,
                                                 int64_t seq) {
  if (batch < 0 || seq < 0 || static_cast<int64_t>(ids.size()) != batch * seq ||
      static_cast<int64_t>(mask.size()) != batch * seq ||
      (!types.empty() && static_cast<int64_t>(types.size()) != batch * seq)) {
    return absl::InvalidArgumentError("ids, mask and types must be [batch, seq]");
  }
  const int64_t type_rows = std::max<int64_t>(spec.type_vocab_size, 1);
  for (int64_t type : types) {
    if (type < 0 || type >= type_rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("token type ", type, " is outside [0, ", type_rows, ")"));
    }
  }
  if (seq > spec.MaxSequenceLength()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequence of ", seq, " tokens; the model allows ", spec.MaxSequenceLength()));
  }
  for (int64_t id : ids) {
    if (id < 0 || id >= spec.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " is outside [0, ", spec.vocab_size, ")"));
    }
  }
  for (int64_t m : mask) {
    if (m != 0 && m != 1) return absl::InvalidArgumentError("mask values are 0 or 1");
  }
  return PackedSequences(ids.data(), mask.data(), batch, seq,
                         types.empty() ? nullptr : types.data(), spec.position_padding_id);
}

namespace {

// Checks and packs the batch, stages it on a compute stream of its own, runs
// fn(stream, view, out) with `out` [batch, width] FP32 device memory, and
// returns `out` on the host. Blocks until done.
template <typename Fn>
absl::StatusOr<std::vector<float>> RunOnDevice(const TransformerSpec& spec,
                                               const DeviceContext& context,
                                               absl::Span<const int64_t> ids,
                                               absl::Span<const int64_t> mask,
                                               absl::Span<const int64_t> types, int64_t batch,
                                               int64_t seq, int64_t width, Fn fn) {
  INFER_ASSIGN_OR_RETURN(const PackedSequences host,
                         CheckAndPackHost(spec, ids, types, mask, batch, seq));
  if (batch == 0) return std::vector<float>();
  const PackedSequencesView h = host.view();
  const PackedLayout layout{h.rows, h.tokens, /*with_types=*/!types.empty()};
  INFER_ASSIGN_OR_RETURN(ComputeStream stream,
                         ComputeStream::Create(context.device, context.allocator));
  Stream* s = stream.get();
  INFER_ASSIGN_OR_RETURN(DeviceBuffer input,
                         DeviceBuffer::Allocate(context.allocator, layout.bytes(), s));
  INFER_ASSIGN_OR_RETURN(
      DeviceBuffer out,
      DeviceBuffer::Allocate(context.allocator, batch * width * sizeof(float), s));
  INFER_RETURN_IF_ERROR(context.device->CopyToDevice(input.get(), h.ids, layout.bytes(), s));
  const PackedSequencesView view =
      layout.View(input.as<int32_t>(), h.host_offsets, h.longest, h.width);
  INFER_RETURN_IF_ERROR(fn(s, view, out.as<float>()));
  std::vector<float> result(batch * width);
  INFER_RETURN_IF_ERROR(
      context.device->CopyToHost(result.data(), out.get(), result.size() * sizeof(float), s));
  INFER_RETURN_IF_ERROR(context.device->SynchronizeStream(s));
  return result;
}

}  // namespace

absl::StatusOr<std::vector<float>> EncodeOnDevice(const TransformerEncoder& encoder,
                                                  const DeviceContext& context,
                                                  absl::Span<const int64_t> ids,
                                                  absl::Span<const int64_t> mask,
                                                  absl::Span<const int64_t> types, int64_t batch,
                                                  int64_t seq, Pooling pooling, bool normalize) {
  return RunOnDevice(encoder.spec(), context, ids, mask, types, batch, seq,
                     encoder.spec().hidden_size,
                     [&](Stream* s, const PackedSequencesView& view, float* out) {
                       return encoder.Encode(s, view, pooling, normalize, out);
                     });
}

absl::StatusOr<std::vector<float>> SparseOnDevice(const TransformerEncoder& encoder,
                                                  const DeviceContext& context,
                                                  absl::Span<const int64_t> ids,
                                                  absl::Span<const int64_t> mask,
                                                  absl::Span<const int64_t> types, int64_t batch,
                                                  int64_t seq, const SpladePooling& pooling) {
  const TransformerSpec& spec = encoder.spec();
  const SpladeHead* head = encoder.splade();
  if (head == nullptr || !encoder.HasTokenStates()) {
    return absl::FailedPreconditionError(
        absl::StrCat(spec.model_type, " encoder loaded without a masked-LM head"));
  }
  return RunOnDevice(
      spec, context, ids, mask, types, batch, seq, head->vocab(),
      [&](Stream* s, const PackedSequencesView& view, float* out) -> absl::Status {
        // Every token's state, then the head (no states for empty texts only).
        DeviceBuffer states, scratch;
        if (view.tokens > 0) {
          INFER_ASSIGN_OR_RETURN(
              states, DeviceBuffer::Allocate(context.allocator,
                                             view.tokens * spec.hidden_size * sizeof(float), s));
          INFER_RETURN_IF_ERROR(encoder.EncodeWithStates(
              s, view, Pooling::kMean, /*normalize=*/false, nullptr, states.as<float>()));
          INFER_ASSIGN_OR_RETURN(
              scratch,
              DeviceBuffer::Allocate(context.allocator, head->ScratchBytes(view.tokens), s));
        }
        return head->Run(s, states.as<float>(), view.host_offsets, view.offsets, view.rows,
                         view.tokens, pooling, out, scratch.get());
      });
}

}  // namespace infer
