#include "models/onednn_ops.h"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "models/onednn_pieces.h"
#include "runtime/status_macros.h"

namespace infer::cpu {
using namespace detail;  // NOLINT: this file's own helpers

const std::vector<int64_t>& PieceSizes() {
  static const std::vector<int64_t>* const sizes = [] {
    auto* v = new std::vector<int64_t>;
    for (int64_t n = kLargestPiece; n >= kSmallestPowerPiece; n /= 2) v->push_back(n);
    for (int64_t n = kSmallestPowerPiece - 1; n >= 1; --n) v->push_back(n);
    return v;
  }();
  return *sizes;
}

int64_t NextPiece(int64_t rows) {
  if (rows >= kLargestPiece) return kLargestPiece;
  if (rows >= kSmallestPowerPiece) return static_cast<int64_t>(std::bit_floor(uint64_t(rows)));
  return rows;
}

size_t ElementBytes(ElementType type) { return type == ElementType::kBf16 ? 2 : 4; }

absl::StatusOr<std::unique_ptr<OnednnLinear>> OnednnLinear::Create(const dnnl::engine& engine,
                                                                   const LinearOptions& o,
                                                                   const float* w, const float* b) {
  if (o.int8) return CreateInt8(engine, o, w, b);
  const std::string what = absl::StrCat(o.input == ElementType::kBf16 ? "bf16" : "fp32",
                                        " matmul [", o.in, " -> ", o.out, "]");
  std::unique_ptr<OnednnLinear> op(new OnednnLinear());
  op->options_ = o;
  op->engine_ = engine;
  const OneThreadScope one_thread(o.fixed_rows > 0);
  try {
    // In order: y = x·W + b, then GELU, then the old y added.
    dnnl::post_ops post;
    if (const auto act = EltwiseOf(o.activation)) {
      post.append_eltwise(1.0f, act->first, act->second, 0.0f);
    }
    if (o.accumulate) post.append_sum(1.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(post);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::memory::desc bias_desc({1, o.out}, dt::f32, tag::ab);
    // The largest piece picks the weights' layout; every other piece is made
    // for that same layout, so one copy of the weights serves them all.
    dnnl::memory::desc weights_desc({o.in, o.out}, DataTypeOf(o.input), tag::any);
    const std::vector<int64_t> sizes = OpPieceSizes(o.fixed_rows);
    for (const int64_t rows : sizes) {
      const dnnl::memory::desc src({rows, o.in}, DataTypeOf(o.input), tag::ab);
      const dnnl::memory::desc dst({rows, o.out}, DataTypeOf(o.output), tag::ab);
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, weights_desc, bias_desc, dst),
                                            attr, engine);
      if (rows == sizes.front()) {
        weights_desc = pd.weights_desc();
        op->implementation_ = pd.impl_info_str();
      }
      op->scratchpad_bytes_ = std::max(op->scratchpad_bytes_, pd.scratchpad_desc().get_size());
      op->pieces_.push_back({dnnl::matmul(pd), src, dst, pd.scratchpad_desc()});
    }
    // W is [out, in] row-major: as the [in, out] matrix oneDNN multiplies
    // by, that is the transposed ("ba") layout.
    dnnl::memory plain({{o.in, o.out}, dt::f32, tag::ba}, engine, const_cast<float*>(w));
    op->weights_ = dnnl::memory(weights_desc, engine);
    dnnl::stream stream(engine);
    dnnl::reorder(plain, op->weights_).execute(stream, plain, op->weights_);
    stream.wait();
    op->bias_ = dnnl::memory(bias_desc, engine);
    if (b != nullptr) {
      std::memcpy(op->bias_.get_data_handle(), b, o.out * sizeof(float));
    } else {
      std::memset(op->bias_.get_data_handle(), 0, o.out * sizeof(float));
    }
    op->weight_bytes_ = static_cast<int64_t>(weights_desc.get_size() + bias_desc.get_size());
  } catch (const dnnl::error& e) {
    return FromError(e, what);
  }
  return op;
}

absl::Status OnednnLinear::Run(dnnl::stream& stream, const void* x, int64_t rows, void* y,
                               void* scratchpad) const {
  if (options_.int8) return RunInt8(stream, x, rows, y, scratchpad);
  const size_t in_row = options_.in * ElementBytes(options_.input);
  const size_t out_row = options_.out * ElementBytes(options_.output);
  auto execute = [&](dnnl::stream& s, const Piece& p, int64_t done, void* scratch) {
    dnnl::memory src(p.src, engine_,
                     const_cast<char*>(static_cast<const char*>(x)) + done * in_row);
    dnnl::memory dst(p.dst, engine_, static_cast<char*>(y) + done * out_row);
    dnnl::memory pad(p.scratchpad, engine_, scratch);
    p.primitive.execute(s, {{DNNL_ARG_SRC, src},
                            {DNNL_ARG_WEIGHTS, weights_},
                            {DNNL_ARG_BIAS, bias_},
                            {DNNL_ARG_DST, dst},
                            {DNNL_ARG_SCRATCHPAD, pad}});
  };
  const std::string what = absl::StrCat("matmul [", options_.in, " -> ", options_.out, "]");
  if (const int64_t fixed = options_.fixed_rows; fixed > 0) {
    INFER_RETURN_IF_ERROR(CheckFixedRows(rows, fixed));
    return RunPiecesInParallel(
        engine_, rows / fixed, ScratchpadStride(scratchpad_bytes_), scratchpad, what,
        [&](dnnl::stream& s, int64_t i, void* pad) { execute(s, pieces_[0], i * fixed, pad); });
  }
  try {
    ForEachPiece(pieces_, rows,
                 [&](const Piece& p, int64_t done) { execute(stream, p, done, scratchpad); });
    stream.wait();
  } catch (const dnnl::error& e) {
    return FromError(e, what);
  }
  return absl::OkStatus();
}

size_t OnednnLinear::ScratchpadBytes(int threads) const {
  if (options_.int8) return Int8ScratchpadBytes(threads);
  if (options_.fixed_rows == 0) return scratchpad_bytes_;
  return ScratchpadStride(scratchpad_bytes_) * static_cast<size_t>(std::max(threads, 1));
}

size_t OnednnLinear::ScratchpadBytesPerRow() const {
  return options_.int8 && options_.fixed_rows == 0 ? Int8BytesPerRow() : 0;
}

size_t OnednnLinear::ScratchpadBytesFor(int64_t rows, int threads) const {
  const int64_t largest = options_.fixed_rows > 0 ? options_.fixed_rows : PieceSizes().front();
  return ScratchpadBytes(threads) +
         ScratchpadBytesPerRow() * static_cast<size_t>(std::clamp<int64_t>(rows, 0, largest));
}

absl::StatusOr<std::unique_ptr<OnednnLayerNorm>> OnednnLayerNorm::Create(
    const dnnl::engine& engine, int64_t hidden, float epsilon, const float* gamma,
    const float* beta, int64_t fixed_rows) {
  std::unique_ptr<OnednnLayerNorm> op(new OnednnLayerNorm());
  op->hidden_ = hidden;
  op->fixed_rows_ = fixed_rows;
  op->engine_ = engine;
  const OneThreadScope one_thread(fixed_rows > 0);
  try {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    for (const int64_t rows : OpPieceSizes(fixed_rows)) {
      const dnnl::memory::desc data({rows, hidden}, dt::f32, tag::ab);
      const dnnl::layer_normalization_forward::primitive_desc pd(
          dnnl::layer_normalization_forward::desc(
              dnnl::prop_kind::forward_inference, data, epsilon,
              dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift),
          attr, engine);
      op->scratchpad_bytes_ = std::max(op->scratchpad_bytes_, pd.scratchpad_desc().get_size());
      op->pieces_.push_back({dnnl::layer_normalization_forward(pd), data, pd.scratchpad_desc()});
    }
    const dnnl::memory::desc param({hidden}, dt::f32, tag::a);
    op->gamma_ = dnnl::memory(param, engine);
    op->beta_ = dnnl::memory(param, engine);
    std::memcpy(op->gamma_.get_data_handle(), gamma, hidden * sizeof(float));
    if (beta != nullptr) {
      std::memcpy(op->beta_.get_data_handle(), beta, hidden * sizeof(float));
    } else {
      std::memset(op->beta_.get_data_handle(), 0, hidden * sizeof(float));
    }
  } catch (const dnnl::error& e) {
    return FromError(e, absl::StrCat("layer normalization [", hidden, "]"));
  }
  return op;
}

absl::Status OnednnLayerNorm::Run(dnnl::stream& stream, float* x, int64_t rows,
                                  void* scratchpad) const {
  auto execute = [&](dnnl::stream& s, const Piece& p, int64_t done, void* scratch) {
    dnnl::memory data(p.data, engine_, x + done * hidden_);
    dnnl::memory pad(p.scratchpad, engine_, scratch);
    p.primitive.execute(s, {{DNNL_ARG_SRC, data},
                            {DNNL_ARG_DST, data},
                            {DNNL_ARG_SCALE, gamma_},
                            {DNNL_ARG_SHIFT, beta_},
                            {DNNL_ARG_SCRATCHPAD, pad}});
  };
  const std::string what = absl::StrCat("layer normalization [", hidden_, "]");
  if (fixed_rows_ > 0) {
    INFER_RETURN_IF_ERROR(CheckFixedRows(rows, fixed_rows_));
    return RunPiecesInParallel(engine_, rows / fixed_rows_, ScratchpadStride(scratchpad_bytes_),
                               scratchpad, what, [&](dnnl::stream& s, int64_t i, void* pad) {
                                 execute(s, pieces_[0], i * fixed_rows_, pad);
                               });
  }
  try {
    ForEachPiece(pieces_, rows,
                 [&](const Piece& p, int64_t done) { execute(stream, p, done, scratchpad); });
    stream.wait();
  } catch (const dnnl::error& e) {
    return FromError(e, what);
  }
  return absl::OkStatus();
}

size_t OnednnLayerNorm::ScratchpadBytes(int threads) const {
  if (fixed_rows_ == 0) return scratchpad_bytes_;
  return ScratchpadStride(scratchpad_bytes_) * static_cast<size_t>(std::max(threads, 1));
}

}  // namespace infer::cpu
