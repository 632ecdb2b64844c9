#include "models/transformer/splade_head_cuda.h"

#include <cublas_v2.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "models/transformer/encoder_cuda.h"
#include "models/transformer/transformer_cuda_kernels.cuh"
#include "runtime/cuda_device.h"
#include "runtime/status_macros.h"

namespace infer {
namespace {

constexpr int64_t kAlign = 256;
int64_t Aligned(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// y[rows, out] = x[rows, in] · Wᵀ, W FP16 [out, in] row-major, x FP16; y
// FP16 or FP32 (`y_type`). Column-major for cuBLAS: yᵀ = W · xᵀ.
absl::Status Gemm(Stream* stream, const void* w, const __half* x, int64_t rows, int64_t in,
                  int64_t out, void* y, cudaDataType_t y_type) {
  const float alpha = 1.0f, beta = 0.0f;
  return CublasStatus(
      cublasGemmEx(NativeCublasHandle(stream), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out),
                   static_cast<int>(rows), static_cast<int>(in), &alpha, w, CUDA_R_16F,
                   static_cast<int>(in), x, CUDA_R_16F, static_cast<int>(in), &beta, y, y_type,
                   static_cast<int>(out), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx (SPLADE head)");
}

}  // namespace

absl::StatusOr<std::unique_ptr<SpladeHeadCuda>> SpladeHeadCuda::Create(
    const TransformerSpec& spec, const TransformerWeights::MaskedLm& head, CudaUploader& up) {
  if (!head.present()) return absl::InvalidArgumentError("SPLADE needs a masked-LM head");
  if (spec.hidden_size > cuda::kMaxRowHidden) {
    return absl::FailedPreconditionError(absl::StrCat("SPLADE head: hidden size ", spec.hidden_size,
                                                      " over the row kernels' ",
                                                      cuda::kMaxRowHidden));
  }
  std::unique_ptr<SpladeHeadCuda> m(new SpladeHeadCuda());
  m->hidden_ = spec.hidden_size;
  m->vocab_ = head.decoder.out;
  m->eps_ = static_cast<float>(spec.norm_eps);
  m->activation_ = SpladeHeadActivation(spec);
  const int64_t before = up.bytes();
  INFER_ASSIGN_OR_RETURN(m->dense_w_, up.Half(head.dense.w));
  INFER_ASSIGN_OR_RETURN(m->dense_b_, up.Float(head.dense.b));
  INFER_ASSIGN_OR_RETURN(m->gamma_, up.Float(head.norm.gamma));
  INFER_ASSIGN_OR_RETURN(m->beta_, up.Float(head.norm.beta));
  INFER_ASSIGN_OR_RETURN(m->decoder_w_, up.Half(head.decoder.w));
  INFER_ASSIGN_OR_RETURN(m->decoder_b_, up.Float(head.decoder.b));
  m->weight_bytes_ = up.bytes() - before;
  return m;
}

int64_t SpladeHeadCuda::ScratchBytes(int64_t tokens) const {
  const int64_t chunk = std::min(tokens, kChunkTokens);
  if (chunk <= 0) return 0;
  return 2 * Aligned(chunk * hidden_ * 2) + Aligned(chunk * vocab_ * 4);
}

absl::Status SpladeHeadCuda::Run(Stream* stream, const float* states, const int32_t* offsets,
                                 const int32_t* device_offsets, int64_t rows, int64_t tokens,
                                 const SpladePooling& pooling, float* out, void* scratch) const {
  const int64_t h = hidden_, v = vocab_;
  if (rows == 0) return absl::OkStatus();
  if (NativeCublasHandle(stream) == nullptr) {
    return absl::FailedPreconditionError("the CUDA SPLADE head runs on a compute stream");
  }
  cudaStream_t s = NativeCudaStream(stream);
  INFER_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(out, 0, rows * v * sizeof(float), s),
                             "cudaMemsetAsync (SPLADE output)");
  if (tokens == 0) return absl::OkStatus();
  const int64_t chunk = std::min(tokens, kChunkTokens);
  auto* base = static_cast<char*>(scratch);
  auto* input = reinterpret_cast<__half*>(base);
  auto* hidden = reinterpret_cast<__half*>(base + Aligned(chunk * h * 2));
  auto* logits = reinterpret_cast<float*>(base + 2 * Aligned(chunk * h * 2));
  const cuda::RowNorm norm{gamma_.as<float>(), beta_.as<float>(), eps_, /*rms=*/false};
  // The first sequence that ends after the chunk's first token.
  int64_t first = 0;
  for (int64_t c0 = 0; c0 < tokens; c0 += chunk) {
    const int64_t n = std::min(chunk, tokens - c0), c1 = c0 + n;
    INFER_RETURN_IF_CUDA_ERROR(cuda::LaunchFloatToHalf(s, states + c0 * h, n * h, input),
                               "SPLADE input kernel");
    INFER_RETURN_IF_ERROR(Gemm(stream, dense_w_.get(), input, n, h, h, hidden, CUDA_R_16F));
    INFER_RETURN_IF_CUDA_ERROR(
        cuda::LaunchActivation(s, hidden, dense_b_.as<float>(), n, h, CudaActivationOf(activation_),
                               /*gated=*/false),
        "SPLADE activation kernel");
    INFER_RETURN_IF_CUDA_ERROR(cuda::LaunchAddNorm(s, hidden, nullptr, nullptr, norm, n, h, hidden),
                               "SPLADE norm kernel");
    INFER_RETURN_IF_ERROR(Gemm(stream, decoder_w_.get(), hidden, n, h, v, logits, CUDA_R_32F));
    while (first < rows && offsets[first + 1] <= c0) ++first;
    int64_t last = first;
    while (last < rows && offsets[last] < c1) ++last;
    // The kernel's grid takes 65535 sequences at a time (empty ones count).
    for (int64_t s0 = first; s0 < last; s0 += 65535) {
      INFER_RETURN_IF_CUDA_ERROR(
          cuda::LaunchSpladeFold(s, logits, decoder_b_.as<float>(), device_offsets, s0,
                                 std::min(last, s0 + 65535), c0, c1, v, pooling.sum,
                                 pooling.log1p_twice, out),
          "SPLADE fold kernel");
    }
  }
  return absl::OkStatus();
}

}  // namespace infer
