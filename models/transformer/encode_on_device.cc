#include "models/transformer/encode_on_device.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "models/packed_sequences.h"
#include "runtime/caching_allocator.h"
#include "runtime/compute_stream.h"
#include "runtime/status_macros.h"

namespace infer {

absl::StatusOr<std::vector<float>> EncodeOnDevice(const TransformerEncoder& encoder,
                                                  const DeviceContext& context,
                                                  absl::Span<const int64_t> ids,
                                                  absl::Span<const int64_t> mask,
                                                  absl::Span<const int64_t> types, int64_t batch,
                                                  int64_t seq, Pooling pooling, bool normalize) {
  const TransformerSpec& spec = encoder.spec();
  if (batch < 0 || seq < 0 || static_cast<int64_t>(ids.size()) != batch * seq ||
      static_cast<int64_t>(mask.size()) != batch * seq ||
      (!types.empty() && static_cast<int64_t>(types.size()) != batch * seq)) {
    return absl::InvalidArgumentError(absl::StrCat("ids, mask and types must each be ", batch,
                                                   " x ", seq, " (types may be empty)"));
  }
  const int64_t type_rows = std::max<int64_t>(spec.type_vocab_size, 1);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t real = 0;
    for (int64_t s = 0; s < seq; ++s) {
      const int64_t i = b * seq + s;
      if (mask[i] != 0 && mask[i] != 1) return absl::InvalidArgumentError("mask values are 0 or 1");
      if (ids[i] < 0 || ids[i] >= spec.vocab_size) {
        return absl::InvalidArgumentError(
            absl::StrCat("id ", ids[i], " is outside the vocabulary of ", spec.vocab_size));
      }
      if (!types.empty() && (types[i] < 0 || types[i] >= type_rows)) {
        return absl::InvalidArgumentError(
            absl::StrCat("token type ", types[i], " past ", type_rows));
      }
      real += mask[i];
    }
    if (real > spec.MaxSequenceLength()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a sequence of ", real, " tokens; the model takes up to ", spec.MaxSequenceLength()));
    }
  }
  const int64_t hidden = spec.hidden_size;
  if (batch == 0) return std::vector<float>();
  const PackedSequences host(ids.data(), mask.data(), batch, seq,
                             types.empty() ? nullptr : types.data());
  const PackedSequencesView h = host.view();
  const PackedLayout layout{h.rows, h.tokens, /*with_types=*/!types.empty()};
  INFER_ASSIGN_OR_RETURN(ComputeStream stream,
                         ComputeStream::Create(context.device, context.allocator));
  Stream* s = stream.get();
  INFER_ASSIGN_OR_RETURN(DeviceBuffer input,
                         DeviceBuffer::Allocate(context.allocator, layout.bytes(), s));
  INFER_ASSIGN_OR_RETURN(
      DeviceBuffer out,
      DeviceBuffer::Allocate(context.allocator, batch * hidden * sizeof(float), s));
  INFER_RETURN_IF_ERROR(context.device->CopyToDevice(input.get(), h.ids, layout.bytes(), s));
  const PackedSequencesView view =
      layout.View(input.as<int32_t>(), h.host_offsets, h.longest, h.width);
  INFER_RETURN_IF_ERROR(encoder.Encode(s, view, pooling, normalize, out.as<float>()));
  std::vector<float> result(batch * hidden);
  INFER_RETURN_IF_ERROR(
      context.device->CopyToHost(result.data(), out.get(), result.size() * sizeof(float), s));
  INFER_RETURN_IF_ERROR(context.device->SynchronizeStream(s));
  return result;
}

}  // namespace infer
