#include "models/cpu_bf16_speed.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "models/onednn_ops.h"
#include "models/precision.h"
#include "models/transformer/cpu_kernels.h"
#include "runtime/cpu_device.h"

namespace infer {
namespace {

constexpr int64_t kRows = 256, kIn = 768, kOut = 3072;

double Median(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

CpuBf16Speed Measure(int threads) {
  CpuBf16Speed s;
  s.native = CpuHasNativeBf16();
  if (!s.native) return s;
  UseCpuThreads(std::max(threads, 1));
  // Weights and inputs of a trained layer's scale (the values do not change
  // the speed; non-zero, so no kernel can skip work).
  std::vector<float> w(kOut * kIn), b(kOut), x(kRows * kIn);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.02f * static_cast<float>(i % 97) - 0.96f;
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.01f * static_cast<float>(i % 89) - 0.44f;
  std::vector<uint16_t> x16(x.size());
  cpu::ToBf16(x.data(), static_cast<int64_t>(x.size()), x16.data(), std::max(threads, 1));
  std::vector<float> y(kRows * kOut);
  try {
    const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    cpu::LinearOptions o{.in = kIn, .out = kOut};
    auto fp32 = cpu::OnednnLinear::Create(engine, o, w.data(), b.data());
    o.input = cpu::ElementType::kBf16;
    auto bf16 = cpu::OnednnLinear::Create(engine, o, w.data(), b.data());
    if (!fp32.ok() || !bf16.ok()) return s;
    // oneDNN's scratchpad, 64-byte aligned as the allocator's blocks are.
    std::vector<char> pad(std::max((*fp32)->ScratchpadBytesFor(kRows, threads),
                                   (*bf16)->ScratchpadBytesFor(kRows, threads)) +
                          64);
    void* scratchpad = pad.data() + (64 - reinterpret_cast<uintptr_t>(pad.data()) % 64) % 64;
    dnnl::stream stream(engine);
    // One timed Run, in milliseconds; negative if it fails.
    auto run = [&](const cpu::OnednnLinear& op, const void* in) {
      const auto t0 = std::chrono::steady_clock::now();
      const bool ok = op.Run(stream, in, kRows, y.data(), scratchpad).ok();
      const std::chrono::duration<double, std::milli> d = std::chrono::steady_clock::now() - t0;
      return ok ? d.count() : -1.0;
    };
    std::vector<double> a, c;
    for (int r = 0; r <= CpuBf16Speed::kRounds; ++r) {
      const double ta = run(**fp32, x.data()), tc = run(**bf16, x16.data());
      if (ta < 0 || tc < 0) return s;
      if (r == 0) continue;  // warm-up
      a.push_back(ta);
      c.push_back(tc);
    }
    s.speedup = Median(a) / Median(c);
  } catch (const dnnl::error&) {
    return s;
  }
  s.auto_bf16 = s.speedup >= CpuBf16Speed::kMinSpeedup;
  return s;
}

}  // namespace

const CpuBf16Speed& MeasureCpuBf16Speed(int threads) {
  static std::once_flag once;
  static CpuBf16Speed speed;
  std::call_once(once, [threads] { speed = Measure(threads); });
  return speed;
}

}  // namespace infer
