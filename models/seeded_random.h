// Seeded pseudo-random weights for synthetic models: splitmix64, identical on
// every platform, so a seed names the same weights everywhere.
// Thread-compatible (the caller owns the state).
#ifndef INFER_MODELS_SEEDED_RANDOM_H_
#define INFER_MODELS_SEEDED_RANDOM_H_

#include <cstdint>
#include <vector>

namespace infer {

inline uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Fills `v` with values uniform in [center - scale, center + scale).
inline void FillUniform(std::vector<float>& v, uint64_t& state, float scale, float center = 0.0f) {
  for (float& x : v) {
    const double u = static_cast<double>(SplitMix64(state) >> 11) * 0x1.0p-53;
    x = center + static_cast<float>((2.0 * u - 1.0) * scale);
  }
}

}  // namespace infer

#endif  // INFER_MODELS_SEEDED_RANDOM_H_
