// Seeded random data for numeric tests: the same values on every machine
// (std::mt19937 and std::normal_distribution as libstdc++ implements them).
#ifndef INFER_TESTS_TESTING_RANDOM_DATA_H_
#define INFER_TESTS_TESTING_RANDOM_DATA_H_

#include <cstdint>
#include <random>
#include <vector>

namespace infer::testing {

// `n` draws from a normal distribution of mean 0 and deviation `sigma`.
inline std::vector<float> NormalFloats(int64_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

}  // namespace infer::testing

#endif  // INFER_TESTS_TESTING_RANDOM_DATA_H_
