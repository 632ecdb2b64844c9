// OnednnLinear's INT8 path (LinearOptions::int8): s8 weights per output
// channel, u8 activations per token, int32 sums from oneDNN's matmul, and
// the FP32 result (bias, activation, residual) made by hand in one pass
// (models/quantize.h says why).
//
// Scratch of one piece of n rows, each part 64-byte aligned: oneDNN's
// scratchpad, then the codes [n, in] u8, the sums [n, out] s32, and each
// row's scale and zero point.
#include <omp.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "models/onednn_ops.h"
#include "models/onednn_pieces.h"
#include "models/quantize.h"
#include "runtime/status_macros.h"

namespace infer::cpu {
using namespace detail;  // NOLINT: the ops' shared helpers

namespace {

size_t Align64(size_t bytes) { return (bytes + 63) / 64 * 64; }

// The byte offsets of a piece's parts for `rows` rows.
struct Int8Layout {
  size_t codes, sums, scales, zeros, end;
  Int8Layout(size_t onednn_pad, int64_t rows, int64_t in, int64_t out) {
    const auto n = static_cast<size_t>(rows);
    codes = Align64(onednn_pad);
    sums = codes + Align64(n * in);
    scales = sums + Align64(n * out * sizeof(int32_t));
    zeros = scales + Align64(n * sizeof(float));
    end = zeros + Align64(n * sizeof(int32_t));
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<OnednnLinear>> OnednnLinear::CreateInt8(const dnnl::engine& engine,
                                                                       const LinearOptions& o,
                                                                       const float* w,
                                                                       const float* b) {
  const std::string what = absl::StrCat("int8 matmul [", o.in, " -> ", o.out, "]");
  if (o.input != ElementType::kF32 || o.output != ElementType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": takes and gives FP32"));
  }
  std::unique_ptr<OnednnLinear> op(new OnednnLinear());
  op->options_ = o;
  op->engine_ = engine;
  const OneThreadScope one_thread(o.fixed_rows > 0);
  QuantizedWeights q = QuantizeWeights(w, o.out, o.in, WeightLevels());
  try {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::memory::desc weights_desc({o.in, o.out}, dt::s8, tag::any);
    const std::vector<int64_t> sizes = OpPieceSizes(o.fixed_rows);
    for (const int64_t rows : sizes) {
      const dnnl::memory::desc src({rows, o.in}, dt::u8, tag::ab);
      const dnnl::memory::desc dst({rows, o.out}, dt::s32, tag::ab);
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, weights_desc, dst), attr,
                                            engine);
      if (rows == sizes.front()) {
        weights_desc = pd.weights_desc();
        op->implementation_ = pd.impl_info_str();
      }
      op->scratchpad_bytes_ = std::max(op->scratchpad_bytes_, pd.scratchpad_desc().get_size());
      op->pieces_.push_back(Piece{dnnl::matmul(pd), src, dst, pd.scratchpad_desc()});
    }
    // The codes are [out, in] row-major: the [in, out] matrix's "ba" layout.
    dnnl::memory plain({{o.in, o.out}, dt::s8, tag::ba}, engine, q.q.data());
    op->weights_ = dnnl::memory(weights_desc, engine);
    dnnl::stream stream(engine);
    dnnl::reorder(plain, op->weights_).execute(stream, plain, op->weights_);
    stream.wait();
    const dnnl::memory::desc bias_desc({1, o.out}, dt::f32, tag::ab);
    op->bias_ = dnnl::memory(bias_desc, engine);
    if (b != nullptr) {
      std::memcpy(op->bias_.get_data_handle(), b, o.out * sizeof(float));
    } else {
      std::memset(op->bias_.get_data_handle(), 0, o.out * sizeof(float));
    }
    op->weight_bytes_ = static_cast<int64_t>(weights_desc.get_size() + bias_desc.get_size() +
                                             o.out * (sizeof(float) + sizeof(int32_t)));
  } catch (const dnnl::error& e) {
    return FromError(e, what);
  }
  op->col_scale_ = std::move(q.scale);
  op->col_sum_ = std::move(q.sum);
  return op;
}

void OnednnLinear::RunInt8Piece(dnnl::stream& stream, const Piece& p, int64_t rows, const float* x,
                                float* y, void* scratch, int threads) const {
  const int64_t in = options_.in, out = options_.out;
  const Int8Layout at(scratchpad_bytes_, rows, in, out);
  char* base = static_cast<char*>(scratch);
  auto* codes = reinterpret_cast<uint8_t*>(base + at.codes);
  auto* sums = reinterpret_cast<int32_t*>(base + at.sums);
  auto* scales = reinterpret_cast<float*>(base + at.scales);
  auto* zeros = reinterpret_cast<int32_t*>(base + at.zeros);
  QuantizeRows(x, rows, in, kActivationLevels, codes, scales, zeros, threads);
  dnnl::memory src(p.src, engine_, codes);
  dnnl::memory dst(p.dst, engine_, sums);
  dnnl::memory pad(p.scratchpad, engine_, base);
  p.primitive.execute(stream, {{DNNL_ARG_SRC, src},
                               {DNNL_ARG_WEIGHTS, weights_},
                               {DNNL_ARG_DST, dst},
                               {DNNL_ARG_SCRATCHPAD, pad}});
  stream.wait();
  DequantizeArgs d;
  d.acc = sums;
  d.rows = rows;
  d.width = out;
  d.row_scale = scales;
  d.row_zero = zeros;
  d.col_scale = col_scale_.data();
  d.col_sum = col_sum_.data();
  d.bias = static_cast<const float*>(bias_.get_data_handle());
  d.activation = options_.activation;
  d.y = y;
  d.accumulate = options_.accumulate;
  DequantizeRows(d, threads);
}

absl::Status OnednnLinear::RunInt8(dnnl::stream& stream, const void* x, int64_t rows, void* y,
                                   void* scratchpad) const {
  const auto* in = static_cast<const float*>(x);
  auto* result = static_cast<float*>(y);
  const int64_t in_row = options_.in, out_row = options_.out;
  const std::string what = absl::StrCat("int8 matmul [", options_.in, " -> ", options_.out, "]");
  if (const int64_t fixed = options_.fixed_rows; fixed > 0) {
    INFER_RETURN_IF_ERROR(CheckFixedRows(rows, fixed));
    return RunPiecesInParallel(engine_, rows / fixed, Int8ScratchpadBytes(1), scratchpad, what,
                               [&](dnnl::stream& s, int64_t i, void* pad) {
                                 RunInt8Piece(s, pieces_[0], fixed, in + i * fixed * in_row,
                                              result + i * fixed * out_row, pad, 1);
                               });
  }
  const int threads = omp_get_max_threads();
  try {
    ForEachPiece(pieces_, rows, [&](const Piece& p, int64_t done) {
      RunInt8Piece(stream, p, p.src.dims()[0], in + done * in_row, result + done * out_row,
                   scratchpad, threads);
    });
  } catch (const dnnl::error& e) {
    return FromError(e, what);
  }
  return absl::OkStatus();
}

size_t OnednnLinear::Int8BytesPerRow() const {
  return options_.in + options_.out * sizeof(int32_t) + sizeof(float) + sizeof(int32_t);
}

size_t OnednnLinear::Int8ScratchpadBytes(int threads) const {
  if (options_.fixed_rows == 0) return Int8Layout(scratchpad_bytes_, 0, 0, 0).end + 4 * 64;
  const size_t slice = ScratchpadStride(
      Int8Layout(scratchpad_bytes_, options_.fixed_rows, options_.in, options_.out).end);
  return slice * static_cast<size_t>(std::max(threads, 1));
}

}  // namespace infer::cpu
