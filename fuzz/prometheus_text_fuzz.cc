// A server's /metrics page as infer-bench reads it (Prometheus text format
// 0.0.4): ParsePrometheusText must refuse malformed text with
// INVALID_ARGUMENT naming the line, in strict and lenient mode (the first
// byte picks).
#include <cstddef>
#include <cstdint>
#include <string>

#include "bench/loadgen/prometheus_text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  infer::loadgen::ParseOptions options;
  options.strict = (data[0] & 1) != 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  (void)infer::loadgen::ParsePrometheusText(text, options);
  return 0;
}
