// Whether `precision: auto` computes in BF16 on this CPU: where oneDNN
// offers native BF16 (CpuHasNativeBf16, models/precision.h) and its BF16
// matmul is measurably faster here than its FP32 one.
//
// Native BF16 is not always faster. On an Intel Xeon guest of family 6
// model 207 (Emerald Rapids) with AVX512_BF16 and without AMX, oneDNN 2.6's
// brg:avx512_core_bf16 matmul ran all-MiniLM-L6-v2 at 0.65× the speed of its
// FP32 brgemm (encoder-bench, 8 × 64 and 8 × 256), while on an AMD Zen 4
// BF16 ran at 1.85× FP32: the BF16 dot-product instruction's rate relative
// to the FMA's differs by core (on that Xeon VDPBF16PS issues at a quarter
// of the FMA's rate, so BF16 peaks at half of FP32: build/bin/cpu-peak), and
// oneDNN's ISA names cannot tell them apart. So the choice is measured, not
// inferred.
//
// The measurement: a [256, 768] × [768, 3072] matmul (BERT-base's first FFN
// layer over 256 tokens, 1.2 GFLOP) in FP32 and in BF16 on `threads`
// threads, one warm-up run of each, then kRounds alternating timed runs;
// BF16 is chosen when the FP32 median is at least kMinSpeedup times the
// BF16 one. Once per process, by its first caller's thread count (about
// 0.1 s with 2 cores); later calls return the same result. A CPU whose two
// speeds are close could choose either from one start to the next; a
// config that names `fp32` or `bf16` fixes the numbers.
//
// Thread-safety: safe to call from any thread (the first call measures,
// the others wait for it).
#ifndef INFER_MODELS_CPU_BF16_SPEED_H_
#define INFER_MODELS_CPU_BF16_SPEED_H_

namespace infer {

struct CpuBf16Speed {
  static constexpr int kRounds = 5;
  static constexpr double kMinSpeedup = 1.2;

  bool native = false;  // CpuHasNativeBf16()
  // FP32 median time / BF16 median time; 0 when not native, or when a
  // matmul could not be made or run.
  double speedup = 0;
  // What auto computes in: BF16 when native && speedup >= kMinSpeedup.
  bool auto_bf16 = false;
};

const CpuBf16Speed& MeasureCpuBf16Speed(int threads);

}  // namespace infer

#endif  // INFER_MODELS_CPU_BF16_SPEED_H_
