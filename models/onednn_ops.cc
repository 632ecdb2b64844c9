#include "models/onednn_ops.h"

#include <bit>
#include <cstring>
#include <exception>

#include "absl/strings/str_cat.h"

namespace infer::cpu {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

constexpr int64_t kLargestPiece = 1024;
constexpr int64_t kSmallestPowerPiece = 16;

// Index of a piece size in PieceSizes().
size_t PieceIndex(int64_t rows) {
  if (rows >= kSmallestPowerPiece) {
    return static_cast<size_t>(std::countl_zero(static_cast<uint64_t>(rows)) -
                               std::countl_zero(static_cast<uint64_t>(kLargestPiece)));
  }
  return 7 + static_cast<size_t>(kSmallestPowerPiece - 1 - rows);
}

dt DataTypeOf(ElementType type) { return type == ElementType::kBf16 ? dt::bf16 : dt::f32; }

const char* IsaName() {
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
absl::Status FromError(const dnnl::error& e, const std::string& what) {
  if (e.status == dnnl_unimplemented) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": oneDNN has no kernel for it on this CPU (instruction set ", IsaName(), ")"));
  }
  return absl::InternalError(
      absl::StrCat(what, ": oneDNN error ", static_cast<int>(e.status), " (", e.what(), ")"));
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

}  // namespace

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
  const std::string what = absl::StrCat(o.input == ElementType::kBf16 ? "bf16" : "fp32",
                                        " matmul [", o.in, " -> ", o.out, "]");
  std::unique_ptr<OnednnLinear> op(new OnednnLinear());
  op->options_ = o;
  op->engine_ = engine;
  try {
    // In order: y = x·W + b, then GELU, then the old y added.
    dnnl::post_ops post;
    if (o.gelu) post.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
    if (o.accumulate) post.append_sum(1.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(post);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::memory::desc bias_desc({1, o.out}, dt::f32, tag::ab);
    // The largest piece picks the weights' layout; every other piece is made
    // for that same layout, so one copy of the weights serves them all.
    dnnl::memory::desc weights_desc({o.in, o.out}, DataTypeOf(o.input), tag::any);
    for (const int64_t rows : PieceSizes()) {
      const dnnl::memory::desc src({rows, o.in}, DataTypeOf(o.input), tag::ab);
      const dnnl::memory::desc dst({rows, o.out}, DataTypeOf(o.output), tag::ab);
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, weights_desc, bias_desc, dst),
                                            attr, engine);
      if (rows == PieceSizes().front()) {
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
    std::memcpy(op->bias_.get_data_handle(), b, o.out * sizeof(float));
    op->weight_bytes_ = static_cast<int64_t>(weights_desc.get_size() + bias_desc.get_size());
  } catch (const dnnl::error& e) {
    return FromError(e, what);
  }
  return op;
}

absl::Status OnednnLinear::Run(dnnl::stream& stream, const void* x, int64_t rows, void* y,
                               void* scratchpad) const {
  const size_t in_row = options_.in * ElementBytes(options_.input);
  const size_t out_row = options_.out * ElementBytes(options_.output);
  try {
    ForEachPiece(pieces_, rows, [&](const Piece& p, int64_t done) {
      dnnl::memory src(p.src, engine_,
                       const_cast<char*>(static_cast<const char*>(x)) + done * in_row);
      dnnl::memory dst(p.dst, engine_, static_cast<char*>(y) + done * out_row);
      dnnl::memory pad(p.scratchpad, engine_, scratchpad);
      p.primitive.execute(stream, {{DNNL_ARG_SRC, src},
                                   {DNNL_ARG_WEIGHTS, weights_},
                                   {DNNL_ARG_BIAS, bias_},
                                   {DNNL_ARG_DST, dst},
                                   {DNNL_ARG_SCRATCHPAD, pad}});
    });
    stream.wait();
  } catch (const dnnl::error& e) {
    return FromError(e, absl::StrCat("matmul [", options_.in, " -> ", options_.out, "]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<OnednnLayerNorm>> OnednnLayerNorm::Create(const dnnl::engine& engine,
                                                                         int64_t hidden,
                                                                         float epsilon,
                                                                         const float* gamma,
                                                                         const float* beta) {
  std::unique_ptr<OnednnLayerNorm> op(new OnednnLayerNorm());
  op->hidden_ = hidden;
  op->engine_ = engine;
  try {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    for (const int64_t rows : PieceSizes()) {
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
    std::memcpy(op->beta_.get_data_handle(), beta, hidden * sizeof(float));
  } catch (const dnnl::error& e) {
    return FromError(e, absl::StrCat("layer normalization [", hidden, "]"));
  }
  return op;
}

absl::Status OnednnLayerNorm::Run(dnnl::stream& stream, float* x, int64_t rows,
                                  void* scratchpad) const {
  try {
    ForEachPiece(pieces_, rows, [&](const Piece& p, int64_t done) {
      dnnl::memory data(p.data, engine_, x + done * hidden_);
      dnnl::memory pad(p.scratchpad, engine_, scratchpad);
      p.primitive.execute(stream, {{DNNL_ARG_SRC, data},
                                   {DNNL_ARG_DST, data},
                                   {DNNL_ARG_SCALE, gamma_},
                                   {DNNL_ARG_SHIFT, beta_},
                                   {DNNL_ARG_SCRATCHPAD, pad}});
    });
    stream.wait();
  } catch (const dnnl::error& e) {
    return FromError(e, absl::StrCat("layer normalization [", hidden_, "]"));
  }
  return absl::OkStatus();
}

}  // namespace infer::cpu
