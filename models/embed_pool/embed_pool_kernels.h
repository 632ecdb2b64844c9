// Device kernels of the embed_pool model, one implementation per backend.
// Work is enqueued on the given stream (CPU: done when the call returns).
// Thread-safe (stateless).
#ifndef INFER_MODELS_EMBED_POOL_EMBED_POOL_KERNELS_H_
#define INFER_MODELS_EMBED_POOL_EMBED_POOL_KERNELS_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "runtime/build_config.h"
#include "runtime/device.h"

namespace infer {

class EmbedPoolKernels {
 public:
  virtual ~EmbedPoolKernels() = default;

  // out[i, :] = table[ids[i], :] for i < n; every id is in range (validated).
  virtual absl::Status Gather(Stream* stream, const int64_t* ids, int64_t n, const float* table,
                              int64_t hidden, float* out) = 0;

  // For each sequence b: out[b, :] = mean over positions s with
  // ids[b, s] != pad_id of tanh(y[b, s, :] + bias); zeros if none.
  virtual absl::Status BiasTanhMeanPool(Stream* stream, const float* y, const float* bias,
                                        const int64_t* ids, int64_t batch, int64_t seq, int64_t dim,
                                        int64_t pad_id, float* out) = 0;
};

// The kernels for `device`'s kind.
std::unique_ptr<EmbedPoolKernels> CreateEmbedPoolKernels(const Device& device);

std::unique_ptr<EmbedPoolKernels> CreateCpuEmbedPoolKernels();
#if INFER_WITH_CUDA
std::unique_ptr<EmbedPoolKernels> CreateCudaEmbedPoolKernels();
#endif

}  // namespace infer

#endif  // INFER_MODELS_EMBED_POOL_EMBED_POOL_KERNELS_H_
