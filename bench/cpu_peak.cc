// cpu-peak: the arithmetic peak of this CPU's cores, measured, for the
// "share of the peak" figures the benchmarks report.
//
//   build/bin/cpu-peak [--threads 0] [--seconds 0.5] [--rounds 3]
//
// For each instruction the CPU has, one thread per core (--threads 0: every
// core std::thread sees) runs a loop of independent multiply-adds into 12
// accumulators, so that neither the latency of one instruction nor memory
// bounds it, and the best of --rounds rounds is printed (a shared machine
// only ever takes time away):
//   - FP32 FMA, 8 lanes (AVX2 + FMA) and 16 lanes (AVX-512F): 2 flops a lane;
//   - BF16 dot products (AVX512_BF16 VDPBF16PS): 2 products a lane, 4 flops;
//   - INT8 dot products (AVX512_VNNI VPDPBUSD, AVX-VNNI's 8-lane form): 4
//     products a lane, 8 ops.
// What it tells that the CPU's name does not: the rate of each instruction
// on this core, in this guest, at the clock it really runs. On a 2-core
// Emerald Rapids guest without AMX, for instance, VDPBF16PS issues at a
// quarter of FMA's rate, so BF16 arithmetic peaks at half of FP32's there,
// while on a Zen 4 it peaks at twice. No library reports these rates, which
// is why this is written by hand: the loop is the measurement.
//
// One figure per line, GFLOP/s (GOP/s for INT8) for all threads together,
// with the per-core instruction rate, and the clock it implies for the
// FMA (two FMA ports a core on the cores this was written on; the implied
// clock is the FMA rate divided by two, a lower bound where a core has one).
#include <immintrin.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

namespace {

constexpr int kAccumulators = 12;

// One function per instruction set, each with its own target attribute:
// the loops have one shape, but a shared template would need the
// intrinsics inlined into code compiled for the baseline ISA, which GCC
// refuses, and a macro would hide the one line that differs.
//
// Each kernel runs `iterations` × kAccumulators dependent-free
// instructions and returns a value the caller keeps, so nothing is
// optimised away. The empty asm makes the operand opaque to the compiler
// without costing an instruction.
__attribute__((target("avx2,fma"))) float Fma8(long iterations) {
  __m256 acc[kAccumulators];
  for (int k = 0; k < kAccumulators; ++k) acc[k] = _mm256_set1_ps(1e-9f * k);
  __m256 a = _mm256_set1_ps(1.0000001f);
  const __m256 b = _mm256_set1_ps(0.9999999f);
  for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kAccumulators; ++k) acc[k] = _mm256_fmadd_ps(a, b, acc[k]);
    asm volatile("" : "+x"(a));
  }
  float sum = 0;
  for (int k = 0; k < kAccumulators; ++k) sum += _mm256_cvtss_f32(acc[k]);
  return sum;
}

__attribute__((target("avx512f"))) float Fma16(long iterations) {
  __m512 acc[kAccumulators];
  for (int k = 0; k < kAccumulators; ++k) acc[k] = _mm512_set1_ps(1e-9f * k);
  __m512 a = _mm512_set1_ps(1.0000001f);
  const __m512 b = _mm512_set1_ps(0.9999999f);
  for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kAccumulators; ++k) acc[k] = _mm512_fmadd_ps(a, b, acc[k]);
    asm volatile("" : "+v"(a));
  }
  alignas(64) float lanes[16];
  float sum = 0;
  for (int k = 0; k < kAccumulators; ++k) _mm512_store_ps(lanes, acc[k]), sum += lanes[0];
  return sum;
}

__attribute__((target("avx512f,avx512bf16"))) float Bf16Dot16(long iterations) {
  __m512 acc[kAccumulators];
  for (int k = 0; k < kAccumulators; ++k) acc[k] = _mm512_set1_ps(1e-9f * k);
  __m512i a = _mm512_set1_epi16(0x3f80);  // 1.0 in BF16
  const __m512i b = _mm512_set1_epi16(0x3f80);
  for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kAccumulators; ++k)
      acc[k] = _mm512_dpbf16_ps(acc[k], (__m512bh)a, (__m512bh)b);
    asm volatile("" : "+v"(a));
  }
  alignas(64) float lanes[16];
  float sum = 0;
  for (int k = 0; k < kAccumulators; ++k) _mm512_store_ps(lanes, acc[k]), sum += lanes[0];
  return sum;
}

__attribute__((target("avx512f,avx512vnni"))) float Int8Dot16(long iterations) {
  __m512i acc[kAccumulators];
  for (int k = 0; k < kAccumulators; ++k) acc[k] = _mm512_set1_epi32(k);
  __m512i a = _mm512_set1_epi8(1);
  const __m512i b = _mm512_set1_epi8(1);
  for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kAccumulators; ++k) acc[k] = _mm512_dpbusd_epi32(acc[k], a, b);
    asm volatile("" : "+v"(a));
  }
  alignas(64) int32_t lanes[16];
  long sum = 0;
  for (int k = 0; k < kAccumulators; ++k) _mm512_store_si512(lanes, acc[k]), sum += lanes[0];
  return static_cast<float>(sum);
}

__attribute__((target("avx2,avxvnni"))) float Int8Dot8(long iterations) {
  __m256i acc[kAccumulators];
  for (int k = 0; k < kAccumulators; ++k) acc[k] = _mm256_set1_epi32(k);
  __m256i a = _mm256_set1_epi8(1);
  const __m256i b = _mm256_set1_epi8(1);
  for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kAccumulators; ++k) acc[k] = _mm256_dpbusd_avx_epi32(acc[k], a, b);
    asm volatile("" : "+x"(a));
  }
  return static_cast<float>(_mm256_extract_epi32(acc[0], 0));
}

struct Kernel {
  const char* name;
  const char* unit;
  bool available;
  double ops_per_instruction;  // flops (or int8 ops) of one instruction
  bool is_fma;                 // implies the clock
  float (*run)(long);
};

// Seconds for `threads` threads to each run `iterations` iterations,
// started together.
double TimeParallel(const Kernel& kernel, int threads, long iterations) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<float> sink{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      sink.store(kernel.run(iterations));
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  const auto start = std::chrono::steady_clock::now();
  go.store(true);
  for (auto& thread : pool) thread.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cpu-peak: the measured arithmetic peak of this CPU's cores"};
  int threads = 0, rounds = 3;
  double seconds = 0.5;
  app.add_option("--threads", threads, "threads, one a core (0: every core)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--seconds", seconds, "about how long each round runs")
      ->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "rounds; the best is printed")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());

  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const Kernel kernels[] = {
      {"fp32 fma, 8 lanes (avx2)", "GFLOP/s",
       __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), 16, true, Fma8},
      {"fp32 fma, 16 lanes (avx512f)", "GFLOP/s", avx512, 32, true, Fma16},
      {"bf16 dot, 16 lanes (avx512_bf16)", "GFLOP/s",
       avx512 && __builtin_cpu_supports("avx512bf16"), 64, false, Bf16Dot16},
      {"int8 dot, 16 lanes (avx512_vnni)", "GOP/s", avx512 && __builtin_cpu_supports("avx512vnni"),
       128, false, Int8Dot16},
      {"int8 dot, 8 lanes (avx_vnni)", "GOP/s", __builtin_cpu_supports("avxvnni") != 0, 64, false,
       Int8Dot8},
  };
  std::printf("cpu-peak: %d threads, best of %d rounds of about %.2f s\n", threads, rounds,
              seconds);
  for (const Kernel& kernel : kernels) {
    if (!kernel.available) {
      std::printf("%-34s not on this CPU\n", kernel.name);
      continue;
    }
    // Calibrate the iteration count on one short single-thread run.
    long iterations = 1 << 16;
    for (;;) {
      const double t = TimeParallel(kernel, 1, iterations);
      if (t > 0.05) {
        iterations = static_cast<long>(iterations * seconds / t) + 1;
        break;
      }
      iterations *= 4;
    }
    double best = 1e30;
    for (int r = 0; r < rounds; ++r)
      best = std::min(best, TimeParallel(kernel, threads, iterations));
    const double per_core =
        iterations * static_cast<double>(kAccumulators) / best;  // instructions/s
    std::printf("%-34s %8.1f %s  (%.2f G instructions/s a core", kernel.name,
                per_core * threads * kernel.ops_per_instruction / 1e9, kernel.unit, per_core / 1e9);
    if (kernel.is_fma) std::printf("; %.2f GHz at 2 FMA a cycle", per_core / 2e9);
    std::printf(")\n");
  }
  return 0;
}
