// A model's config.pbtxt (protobuf text format, Triton's ModelConfig):
// ParseModelConfig must refuse malformed text and out-of-range fields with
// INVALID_ARGUMENT naming them.
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/kserve/model_repository.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)infer::ParseModelConfig("config.pbtxt", text);
  return 0;
}
