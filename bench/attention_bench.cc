// attention-bench: the CPU attention kernel alone (models/transformer/
// cpu_kernels.h), GFLOP/s per instruction set, for work on that kernel.
//
//   build/bin/attention-bench [--batches 1,8,32] [--lengths 16,64,256]
//                             [--heads 12] [--head-dim 32] [--kv-heads 0]
//                             [--causal] [--window 0] [--threads 0]
//                             [--levels baseline,avx2,avx512,avx512-bf16]
//                             [--runs 20]
//
// Defaults are all-MiniLM-L6-v2's layer (12 heads of 32). Each shape is
// batches × length random queries, keys and values (every sequence
// `length` tokens), run once to warm up and then --runs times; the fastest
// run is reported, since the kernel is compute-bound and a shared machine
// only ever adds time. GFLOP/s counts the two products, 4 · length² ·
// head_dim per sequence and head (a causal or windowed mask counts the
// keys it keeps). avx512-bf16 is AVX-512 with BF16 products
// (AttentionArgs::bf16_products). Levels this CPU (or ONEDNN_MAX_CPU_ISA)
// does not allow are skipped.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "models/transformer/cpu_kernels.h"

namespace {

using infer::cpu::SimdLevel;

bool Allowed(SimdLevel level) {
  const SimdLevel best = infer::cpu::DetectSimdLevel();
  return static_cast<int>(level) <= static_cast<int>(best);
}

// Query-key pairs the masks keep in one sequence of `len` tokens.
double KeptPairs(int64_t len, bool causal, int64_t window) {
  double pairs = 0;
  for (int64_t q = 0; q < len; ++q) {
    int64_t lo = 0, hi = len;
    if (window > 0) lo = std::max<int64_t>(0, q - window), hi = std::min(len, q + window + 1);
    if (causal) hi = std::min(hi, q + 1);
    pairs += static_cast<double>(hi - lo);
  }
  return pairs;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"attention-bench: the CPU attention kernel's GFLOP/s"};
  std::vector<int64_t> batches = {1, 8, 32}, lengths = {16, 64, 256};
  int64_t heads = 12, head_dim = 32, kv_heads = 0, window = 0;
  int threads = 0, runs = 20;
  bool causal = false;
  std::vector<std::string> levels = {"baseline", "avx2", "avx512", "avx512-bf16"};
  app.add_option("--batches", batches, "sequences per batch")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--lengths", lengths, "tokens per sequence")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--heads", heads, "query heads")->capture_default_str()->check(CLI::Range(1, 256));
  app.add_option("--head-dim", head_dim, "head size")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, infer::cpu::kMaxHeadDim));
  app.add_option("--kv-heads", kv_heads, "KV heads, dividing --heads (0: as many as --heads)")
      ->capture_default_str();
  app.add_flag("--causal", causal, "keys up to the query only");
  app.add_option("--window", window, "keys within this distance only (0: all)")
      ->capture_default_str();
  app.add_option("--threads", threads, "threads (0: one per usable core)")->capture_default_str();
  app.add_option("--levels", levels, "instruction sets: baseline, avx2, avx512, avx512-bf16")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--runs", runs, "timed runs per shape (the fastest is reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  CLI11_PARSE(app, argc, argv);
  if (kv_heads == 0) kv_heads = heads;
  if (kv_heads < 1 || heads % kv_heads != 0) {
    std::fprintf(stderr, "attention-bench: --kv-heads must divide --heads\n");
    return 1;
  }
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  std::printf("| level | batch | length | ms | GFLOP/s |\n|---|---:|---:|---:|---:|\n");
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const std::string& name : levels) {
    const bool bf16 = name == "avx512-bf16";
    const SimdLevel level = name == "avx512" || bf16 ? SimdLevel::kAvx512
                            : name == "avx2"         ? SimdLevel::kAvx2
                                                     : SimdLevel::kBaseline;
    if (name != "avx512" && name != "avx2" && name != "baseline" && !bf16) {
      std::fprintf(stderr, "attention-bench: unknown level %s\n", name.c_str());
      return 1;
    }
    if (!Allowed(level) || (bf16 && !infer::cpu::HasBf16Products())) {
      std::printf("| %s | skipped: not on this CPU or above ONEDNN_MAX_CPU_ISA | | | |\n",
                  name.c_str());
      continue;
    }
    for (int64_t batch : batches) {
      for (int64_t len : lengths) {
        const int64_t tokens = batch * len;
        std::vector<float> qkv(tokens * (heads + 2 * kv_heads) * head_dim);
        for (float& x : qkv) x = normal(rng);
        std::vector<float> context(tokens * heads * head_dim);
        std::vector<float> scratch(threads * infer::cpu::AttentionScratchFloats(len, head_dim));
        std::vector<int32_t> offsets(batch + 1);
        for (int64_t r = 0; r <= batch; ++r) offsets[r] = static_cast<int32_t>(r * len);
        infer::cpu::AttentionArgs a;
        a.qkv = qkv.data();
        a.offsets = offsets.data();
        a.rows = batch;
        a.heads = heads;
        a.kv_heads = kv_heads;
        a.head_dim = head_dim;
        a.longest = len;
        a.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        a.causal = causal;
        a.window = window;
        a.context = context.data();
        a.bf16_products = bf16;
        a.scratch = scratch.data();
        infer::cpu::Attention(level, a, threads);  // warm-up
        double best = 1e30;
        for (int i = 0; i < runs; ++i) {
          const auto start = std::chrono::steady_clock::now();
          infer::cpu::Attention(level, a, threads);
          const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
          best = std::min(best, took.count());
        }
        const double flops =
            4.0 * static_cast<double>(batch * heads * head_dim) * KeptPairs(len, causal, window);
        std::printf("| %s | %lld | %lld | %.3f | %.1f |\n", name.c_str(),
                    static_cast<long long>(batch), static_cast<long long>(len), best * 1e3,
                    flops / best / 1e9);
      }
    }
  }
  return 0;
}
