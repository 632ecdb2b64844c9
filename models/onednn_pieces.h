// Helpers shared by the oneDNN ops' source files (onednn_ops.cc and
// onednn_int8_linear.cc): piece bookkeeping, batch-invariant execution on
// the OpenMP team, and oneDNN errors as Status. Not part of any interface.
#ifndef INFER_MODELS_ONEDNN_PIECES_H_
#define INFER_MODELS_ONEDNN_PIECES_H_

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <exception>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "models/onednn_ops.h"

namespace infer::cpu::detail {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

constexpr int64_t kLargestPiece = 1024;
constexpr int64_t kSmallestPowerPiece = 16;

// Index of a piece size in PieceSizes().
inline size_t PieceIndex(int64_t rows) {
  if (rows >= kSmallestPowerPiece) {
    return static_cast<size_t>(std::countl_zero(static_cast<uint64_t>(rows)) -
                               std::countl_zero(static_cast<uint64_t>(kLargestPiece)));
  }
  return 7 + static_cast<size_t>(kSmallestPowerPiece - 1 - rows);
}

inline dt DataTypeOf(ElementType type) { return type == ElementType::kBf16 ? dt::bf16 : dt::f32; }

inline const char* IsaName() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::sse41:
      return "sse41";
    default:
      return "unknown";
  }
}

// A oneDNN error as a Status: unimplemented means this CPU lacks a kernel.
inline absl::Status FromError(const dnnl::error& e, const std::string& what) {
  if (e.status == dnnl_unimplemented) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": oneDNN has no kernel for it on this CPU (instruction set ", IsaName(), ")"));
  }
  return absl::InternalError(
      absl::StrCat(what, ": oneDNN error ", static_cast<int>(e.status), " (", e.what(), ")"));
}

// While it lives, the calling thread's OpenMP team size is one: a
// batch-invariant op's primitive is made (and its work split planned by
// oneDNN) for, and run by, one thread.
class OneThreadScope {
 public:
  explicit OneThreadScope(bool active) : saved_(active ? omp_get_max_threads() : 0) {
    if (active) omp_set_num_threads(1);
  }
  ~OneThreadScope() {
    if (saved_ > 0) omp_set_num_threads(saved_);
  }
  OneThreadScope(const OneThreadScope&) = delete;
  OneThreadScope& operator=(const OneThreadScope&) = delete;

 private:
  const int saved_;
};

// One thread's slice of a batch-invariant op's scratchpad, in bytes.
inline size_t ScratchpadStride(size_t bytes) { return (bytes + 63) / 64 * 64; }

// Batch-invariant execution of `pieces` pieces: spread over the calling
// thread's OpenMP team, each piece run by one thread alone, with that
// thread's own oneDNN stream and slice of `scratchpad`. oneDNN runs a
// primitive single-threaded inside a parallel region, and the primitive was
// made for one thread, so which kernel computes a row, and how its work is
// split, do not depend on the team size, the row's piece, or the batch.
// (Letting oneDNN split a piece over the team instead makes a row's result
// depend on its position in the piece: on AVX2, 4 threads splitting 64
// rows gave rows 30, 31, 62 and 63 to a tail kernel with its own order of
// sums.)
//
// A oneDNN error in any thread is returned (the first one); no exception
// leaves the worksharing loop (OpenMP forbids it, and a thread that left
// would leave the others waiting at its barrier): a thread that failed
// skips its remaining pieces and still reaches the barrier.
template <typename Exec>
absl::Status RunPiecesInParallel(const dnnl::engine& engine, int64_t pieces, size_t stride,
                                 void* scratchpad, const std::string& what, Exec exec) {
  const int team = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), pieces));
  std::mutex mu;
  absl::Status status;
  const auto record = [&](const dnnl::error& e) {
    std::lock_guard<std::mutex> lock(mu);
    if (status.ok()) status = FromError(e, what);
  };
#pragma omp parallel num_threads(team)
  {
    // oneDNN's GEMM sizes its split by the thread's team size when it runs:
    // one thread, whether or not this region is active (a team of one is
    // not, and oneDNN would then split over the outer team).
    const OneThreadScope one_thread(true);
    std::optional<dnnl::stream> stream;
    try {
      stream.emplace(engine);
    } catch (const dnnl::error& e) {
      record(e);
    }
    void* pad = static_cast<char*>(scratchpad) + stride * omp_get_thread_num();
#pragma omp for schedule(static)
    for (int64_t i = 0; i < pieces; ++i) {
      if (!stream.has_value()) continue;
      try {
        exec(*stream, i, pad);
      } catch (const dnnl::error& e) {
        record(e);
        stream.reset();
      }
    }
    if (stream.has_value()) {
      try {
        stream->wait();
      } catch (const dnnl::error& e) {
        record(e);
      }
    }
  }
  return status;
}

// The row counts an op makes primitives for: PieceSizes(), or the one
// fixed count of batch-invariant mode.
inline std::vector<int64_t> OpPieceSizes(int64_t fixed_rows) {
  return fixed_rows > 0 ? std::vector<int64_t>{fixed_rows} : PieceSizes();
}

// Calls fn(piece, first_row) for each piece of a batch of `rows` rows.
template <typename Pieces, typename Fn>
void ForEachPiece(const Pieces& pieces, int64_t rows, Fn fn) {
  for (int64_t done = 0; done < rows;) {
    const int64_t n = NextPiece(rows - done);
    fn(pieces[PieceIndex(n)], done);
    done += n;
  }
}

inline absl::Status CheckFixedRows(int64_t rows, int64_t fixed_rows) {
  if (rows % fixed_rows == 0) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("batch-invariant op given ", rows, " rows, not a multiple of ", fixed_rows));
}

// oneDNN's eltwise algorithm and alpha for an activation; none for kNone.
inline std::optional<std::pair<dnnl::algorithm, float>> EltwiseOf(LinearActivation activation) {
  switch (activation) {
    case LinearActivation::kNone:
      return std::nullopt;
    case LinearActivation::kGelu:
      return std::pair{dnnl::algorithm::eltwise_gelu_erf, 0.0f};
    case LinearActivation::kGeluTanh:
      return std::pair{dnnl::algorithm::eltwise_gelu_tanh, 0.0f};
    case LinearActivation::kSilu:  // swish with alpha 1: x * sigmoid(x)
      return std::pair{dnnl::algorithm::eltwise_swish, 1.0f};
  }
  return std::nullopt;
}

}  // namespace infer::cpu::detail

#endif  // INFER_MODELS_ONEDNN_PIECES_H_
