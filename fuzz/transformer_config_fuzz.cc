// A checkpoint's config.json: ParseTransformerSpec must refuse anything that
// is not a usable configuration of a supported family with INVALID_ARGUMENT
// naming the field, and never accept a shape the encoders cannot run. The
// generated-checkpoint reader (ParseBertConfig) gets the same input.
#include <cstddef>
#include <cstdint>
#include <string>

#include "models/bert/bert_config.h"
#include "models/transformer/transformer_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto spec = infer::ParseTransformerSpec(text, "config.json");
  if (spec.ok()) {
    const infer::TransformerSpec& s = *spec;
    if (s.hidden_size <= 0 || s.num_heads <= 0 || s.num_kv_heads <= 0 || s.head_dim <= 0 ||
        s.num_heads % s.num_kv_heads != 0 || s.MaxSequenceLength() < 1 ||
        static_cast<int64_t>(s.window.size()) != s.num_layers ||
        (!s.rope_theta.empty() && static_cast<int64_t>(s.rope_theta.size()) != s.num_layers) ||
        s.pad_token_id >= s.vocab_size) {
      __builtin_trap();  // accepted a shape the encoders cannot run
    }
  }
  auto config = infer::ParseBertConfig(text, "config.json");
  if (config.ok() && (config->hidden_size <= 0 || config->num_attention_heads <= 0 ||
                      config->hidden_size % config->num_attention_heads != 0)) {
    __builtin_trap();
  }
  return 0;
}
