// BYTES tensor contents in the KServe raw layout (4-byte little-endian
// length, then the bytes, per element), as a client sends them in
// raw_input_contents: BytesElements must refuse any malformed layout with
// INVALID_ARGUMENT and never read outside the buffer. The first byte picks
// the element count the shape declares (0-63); the rest is the buffer.
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/tensor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  infer::Tensor t;
  t.name = "text";
  t.dtype = infer::DataType::kBytes;
  const int64_t count = data[0] % 64;
  t.shape = {count};
  t.data.assign(reinterpret_cast<const char*>(data + 1), size - 1);
  auto elements = infer::BytesElements(t, count, "input 'text'");
  if (elements.ok()) {
    // Every view lies inside the buffer, and they cover it exactly.
    size_t total = 0;
    for (const auto& e : *elements) {
      if (e.data() < t.data.data() || e.data() + e.size() > t.data.data() + t.data.size()) {
        __builtin_trap();
      }
      total += 4 + e.size();
    }
    if (static_cast<int64_t>(elements->size()) != count || total != t.data.size()) {
      __builtin_trap();
    }
  }
  return 0;
}
