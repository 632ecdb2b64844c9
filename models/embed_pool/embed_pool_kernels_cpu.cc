#include <cmath>
#include <cstring>

#include "models/embed_pool/embed_pool_kernels.h"
#include "runtime/build_config.h"

namespace infer {
namespace {

class CpuEmbedPoolKernels final : public EmbedPoolKernels {
 public:
  absl::Status Gather(Stream*, const int64_t* ids, int64_t n, const float* table, int64_t hidden,
                      float* out) override {
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(out + i * hidden, table + ids[i] * hidden, hidden * sizeof(float));
    }
    return absl::OkStatus();
  }

  absl::Status BiasTanhMeanPool(Stream*, const float* y, const float* bias, const int64_t* ids,
                                int64_t batch, int64_t seq, int64_t dim, int64_t pad_id,
                                float* out) override {
    for (int64_t b = 0; b < batch; ++b) {
      float* o = out + b * dim;
      std::memset(o, 0, dim * sizeof(float));
      int64_t tokens = 0;
      for (int64_t s = 0; s < seq; ++s) {
        if (ids[b * seq + s] == pad_id) continue;
        ++tokens;
        const float* row = y + (b * seq + s) * dim;
        for (int64_t d = 0; d < dim; ++d) o[d] += std::tanh(row[d] + bias[d]);
      }
      if (tokens > 0) {
        const float inv = 1.0f / static_cast<float>(tokens);
        for (int64_t d = 0; d < dim; ++d) o[d] *= inv;
      }
    }
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<EmbedPoolKernels> CreateCpuEmbedPoolKernels() {
  return std::make_unique<CpuEmbedPoolKernels>();
}

std::unique_ptr<EmbedPoolKernels> CreateEmbedPoolKernels(const Device& device) {
#if INFER_WITH_CUDA
  if (device.info().kind == DeviceKind::kCuda) return CreateCudaEmbedPoolKernels();
#endif
  return CreateCpuEmbedPoolKernels();
}

}  // namespace infer
