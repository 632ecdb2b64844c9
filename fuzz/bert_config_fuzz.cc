// A checkpoint's config.json: ParseBertConfig must refuse anything that is
// not a usable BERT configuration with INVALID_ARGUMENT naming the field.
#include <cstddef>
#include <cstdint>
#include <string>

#include "models/bert/bert_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = infer::ParseBertConfig(text, "config.json");
  if (config.ok() && (config->hidden_size <= 0 || config->num_attention_heads <= 0 ||
                      config->hidden_size % config->num_attention_heads != 0)) {
    __builtin_trap();  // accepted a shape the encoders cannot run
  }
  return 0;
}
