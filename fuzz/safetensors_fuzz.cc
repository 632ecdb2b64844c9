// A safetensors file's bytes (8-byte header length, JSON header, data), as a
// model repository may hold them: ParseSafetensors must refuse anything
// malformed with INVALID_ARGUMENT, never read outside the file, and never
// allocate more than the file can back.
#include <cstddef>
#include <cstdint>
#include <string>

#include "models/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string file(reinterpret_cast<const char*>(data), size);
  (void)infer::ParseSafetensors(file, "model.safetensors");
  return 0;
}
