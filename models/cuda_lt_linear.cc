#include "models/cuda_lt_linear.h"

#include <cublasLt.h>

#include <cstdint>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/cuda_device.h"
#include "runtime/status_macros.h"

namespace infer {
namespace {

absl::Status LtStatus(cublasStatus_t st, const char* what) {
  return CublasStatus(st, absl::StrCat("cuBLASLt ", what));
}

// A matrix layout for one call, destroyed with it.
class Layout {
 public:
  Layout() = default;
  ~Layout() {
    if (layout_ != nullptr) cublasLtMatrixLayoutDestroy(layout_);
  }
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;
  // Column-major [rows, cols] of `type` with leading dimension ld.
  absl::Status Init(int64_t rows, int64_t cols, int64_t ld, cudaDataType_t type = CUDA_R_16F) {
    return LtStatus(cublasLtMatrixLayoutCreate(&layout_, type, static_cast<uint64_t>(rows),
                                               static_cast<uint64_t>(cols), ld),
                    "matrix layout");
  }
  cublasLtMatrixLayout_t get() const { return layout_; }

 private:
  cublasLtMatrixLayout_t layout_ = nullptr;
};

// The three layouts of y^T[out, rows] = W[out, in] · x^T[in, rows] in
// column-major terms: A is W as stored (column-major [in, out], op T), B is
// x (column-major [in, rows]), C = D is y (column-major [out, rows]).
// A and B are FP16, or E4M3 codes with `inputs` CUDA_R_8F_E4M3; D is FP16.
struct CallLayouts {
  Layout a, b, d;
  absl::Status Init(int64_t out, int64_t in, int64_t rows, cudaDataType_t inputs = CUDA_R_16F) {
    INFER_RETURN_IF_ERROR(a.Init(in, out, in, inputs));
    INFER_RETURN_IF_ERROR(b.Init(in, rows, in, inputs));
    return d.Init(out, rows, out);
  }
};

// The largest power of two (up to 256, cuBLASLt's default assumption) that
// divides the address: the heuristic must not pick an algorithm that needs
// more alignment than the buffer has.
uint32_t Alignment(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && address % a != 0) a /= 2;
  return a;
}

// The heuristic's best algorithm for these layouts and buffers (null
// buffers: assumed fully aligned) within `workspace_bytes`.
absl::StatusOr<cublasLtMatmulAlgo_t> BestAlgo(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              const CallLayouts& l, size_t workspace_bytes,
                                              const void* w, const void* x, const void* y) {
  cublasLtMatmulPreference_t pref = nullptr;
  INFER_RETURN_IF_ERROR(LtStatus(cublasLtMatmulPreferenceCreate(&pref), "preference"));
  const uint32_t align_a = Alignment(w), align_b = Alignment(x), align_d = Alignment(y);
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  auto set = [&](cublasLtMatmulPreferenceAttributes_t attr, const void* value, size_t size) {
    if (st == CUBLAS_STATUS_SUCCESS) {
      st = cublasLtMatmulPreferenceSetAttribute(pref, attr, value, size);
    }
  };
  set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof(workspace_bytes));
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a));
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b));
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof(align_d));
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof(align_d));
  cublasLtMatmulHeuristicResult_t result = {};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = cublasLtMatmulAlgoGetHeuristic(handle, desc, l.a.get(), l.b.get(), l.d.get(), l.d.get(),
                                        pref, 1, &result, &found);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  INFER_RETURN_IF_ERROR(LtStatus(st, "heuristic"));
  if (found == 0) {
    return absl::FailedPreconditionError("cuBLASLt has no algorithm for this matmul");
  }
  return result.algo;
}

// The cuBLASLt handle of `stream`'s cuBLAS handle (cuBLAS documents the
// cast), for a call over `rows` rows.
absl::StatusOr<cublasLtHandle_t> CallHandle(Stream* stream, int64_t rows) {
  if (rows < 1 || rows > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("cuBLASLt linear over ", rows, " rows"));
  }
  cublasHandle_t cublas = NativeCublasHandle(stream);
  if (cublas == nullptr) {
    return absl::FailedPreconditionError("a cuBLASLt linear runs on a compute stream");
  }
  return reinterpret_cast<cublasLtHandle_t>(cublas);
}

}  // namespace

struct LtLinear::Desc {
  cublasLtMatmulDesc_t desc = nullptr;
  ~Desc() {
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

LtLinear::LtLinear(int64_t out, int64_t in, std::unique_ptr<Desc> desc)
    : out_(out), in_(in), desc_(std::move(desc)) {}

LtLinear::~LtLinear() = default;

absl::StatusOr<std::unique_ptr<LtLinear>> LtLinear::Create(int64_t out, int64_t in,
                                                           const void* bias, Epilogue epilogue,
                                                           int64_t probe_rows) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (out < 1 || in < 1 || out > kMax || in > kMax || probe_rows < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuBLASLt linear of ", out, " x ", in, " probed at ", probe_rows, " rows"));
  }
  auto d = std::make_unique<Desc>();
  INFER_RETURN_IF_ERROR(LtStatus(cublasLtMatmulDescCreate(&d->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                                 "matmul descriptor"));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  const cublasLtEpilogue_t ep =
      epilogue == Epilogue::kBiasGelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  const cudaDataType_t bias_type = CUDA_R_16F;
  auto set = [&](cublasLtMatmulDescAttributes_t attr, const void* value, size_t size) {
    return LtStatus(cublasLtMatmulDescSetAttribute(d->desc, attr, value, size), "matmul attribute");
  };
  INFER_RETURN_IF_ERROR(set(CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
  INFER_RETURN_IF_ERROR(set(CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
  INFER_RETURN_IF_ERROR(set(CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep)));
  INFER_RETURN_IF_ERROR(set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  INFER_RETURN_IF_ERROR(set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
  // Refuse at load what the library cannot run: ask its heuristic once, on
  // a handle of our own (the compute streams' handles are theirs).
  cublasLtHandle_t handle = nullptr;
  INFER_RETURN_IF_ERROR(LtStatus(cublasLtCreate(&handle), "handle"));
  CallLayouts l;
  absl::Status probe = l.Init(out, in, probe_rows);
  if (probe.ok()) probe = BestAlgo(handle, d->desc, l, 0, nullptr, nullptr, nullptr).status();
  cublasLtDestroy(handle);
  if (!probe.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cuBLASLt cannot run a ", out, " x ", in, " FP16 linear with a ",
        epilogue == Epilogue::kBiasGelu ? "bias + GELU" : "bias", " epilogue: ", probe.message()));
  }
  return std::unique_ptr<LtLinear>(new LtLinear(out, in, std::move(d)));
}

absl::Status LtLinear::Run(Stream* stream, const void* w, const void* x, int64_t rows,
                           void* y) const {
  INFER_ASSIGN_OR_RETURN(cublasLtHandle_t handle, CallHandle(stream, rows));
  const GemmWorkspace workspace = NativeGemmWorkspace(stream);
  CallLayouts l;
  INFER_RETURN_IF_ERROR(l.Init(out_, in_, rows));
  INFER_ASSIGN_OR_RETURN(cublasLtMatmulAlgo_t algo,
                         BestAlgo(handle, desc_->desc, l, workspace.bytes, w, x, y));
  const float alpha = 1.0f, beta = 0.0f;
  return LtStatus(
      cublasLtMatmul(handle, desc_->desc, &alpha, w, l.a.get(), x, l.b.get(), &beta, y, l.d.get(),
                     y, l.d.get(), &algo, workspace.ptr, workspace.bytes, NativeCudaStream(stream)),
      "matmul");
}

}  // namespace infer

namespace infer {
namespace {

// An FP8 matmul descriptor with both outer-vector scale pointers set; made
// per call (the activation scales move with the batch's buffers), so calls
// on different streams share nothing mutable.
class Fp8Desc {
 public:
  ~Fp8Desc() {
    if (desc_ != nullptr) cublasLtMatmulDescDestroy(desc_);
  }
  absl::Status Init(const float* w_scales, const float* x_scales) {
    INFER_RETURN_IF_ERROR(LtStatus(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                                   "matmul descriptor"));
    const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
    const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    auto set = [&](cublasLtMatmulDescAttributes_t attr, const void* value, size_t size) {
      return LtStatus(cublasLtMatmulDescSetAttribute(desc_, attr, value, size), "matmul attribute");
    };
    INFER_RETURN_IF_ERROR(set(CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
    INFER_RETURN_IF_ERROR(set(CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
    // A is W (M = out: one scale per output channel), B is x^T (N = rows:
    // one scale per token).
    INFER_RETURN_IF_ERROR(set(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode)));
    INFER_RETURN_IF_ERROR(set(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode)));
    INFER_RETURN_IF_ERROR(set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scales, sizeof(w_scales)));
    return set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scales, sizeof(x_scales));
  }
  cublasLtMatmulDesc_t get() const { return desc_; }

 private:
  cublasLtMatmulDesc_t desc_ = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<LtFp8Linear>> LtFp8Linear::Create(int64_t out, int64_t in,
                                                                 int64_t probe_rows) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (out < 1 || in < 1 || out > kMax || in > kMax || probe_rows < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("FP8 linear of ", out, " x ", in, " probed at ", probe_rows, " rows"));
  }
  if (in % 16 != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "an FP8 linear needs an input width that is a multiple of 16; this one has ", in));
  }
  // Any non-null, aligned pointers do for the probe: nothing is read.
  alignas(256) static const float kProbeScale = 1.0f;
  Fp8Desc desc;
  cublasLtHandle_t handle = nullptr;
  INFER_RETURN_IF_ERROR(LtStatus(cublasLtCreate(&handle), "handle"));
  CallLayouts l;
  absl::Status probe = desc.Init(&kProbeScale, &kProbeScale);
  if (probe.ok()) probe = l.Init(out, in, probe_rows, CUDA_R_8F_E4M3);
  if (probe.ok()) probe = BestAlgo(handle, desc.get(), l, 0, nullptr, nullptr, nullptr).status();
  cublasLtDestroy(handle);
  if (!probe.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuBLASLt cannot run a ", out, " x ", in,
                     " FP8 linear with per-channel and per-token scales: ", probe.message()));
  }
  return std::unique_ptr<LtFp8Linear>(new LtFp8Linear(out, in));
}

absl::Status LtFp8Linear::Run(Stream* stream, const void* w_codes, const float* w_scales,
                              const void* x_codes, const float* x_scales, int64_t rows,
                              void* y) const {
  INFER_ASSIGN_OR_RETURN(cublasLtHandle_t handle, CallHandle(stream, rows));
  const GemmWorkspace workspace = NativeGemmWorkspace(stream);
  Fp8Desc desc;
  INFER_RETURN_IF_ERROR(desc.Init(w_scales, x_scales));
  CallLayouts l;
  INFER_RETURN_IF_ERROR(l.Init(out_, in_, rows, CUDA_R_8F_E4M3));
  INFER_ASSIGN_OR_RETURN(cublasLtMatmulAlgo_t algo,
                         BestAlgo(handle, desc.get(), l, workspace.bytes, w_codes, x_codes, y));
  const float alpha = 1.0f, beta = 0.0f;
  return LtStatus(cublasLtMatmul(handle, desc.get(), &alpha, w_codes, l.a.get(), x_codes, l.b.get(),
                                 &beta, y, l.d.get(), y, l.d.get(), &algo, workspace.ptr,
                                 workspace.bytes, NativeCudaStream(stream)),
                  "FP8 matmul");
}

}  // namespace infer
