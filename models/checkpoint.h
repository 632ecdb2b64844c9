// Reading Hugging Face checkpoints: `model.safetensors` (tensors) and the
// folder's files. Every size and offset a file declares is checked
// against the file before it is used, so a corrupt or truncated file gives a
// clear error naming the file and the tensor, never a crash.
//
// Thread-compatible (plain functions and value types).
#ifndef INFER_MODELS_CHECKPOINT_H_
#define INFER_MODELS_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace infer {

// The bytes of a file of a checkpoint's folder; NOT_FOUND naming it when it
// cannot be read.
absl::StatusOr<std::string> ReadCheckpointFile(const std::string& path);

// One tensor of a safetensors file, converted to FP32 (from F32, F16 or BF16).
struct CheckpointTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// The floating-point tensors of a safetensors file, by name (integer tensors,
// such as a position_ids buffer, are checked and skipped). INVALID_ARGUMENT
// (naming the file and tensor) for a malformed header, an unknown dtype, a
// shape that does not match the byte range, or a range outside the file;
// NOT_FOUND when the file cannot be read.
absl::StatusOr<std::map<std::string, CheckpointTensor>> ReadSafetensors(const std::string& path);
// The same, on the bytes of such a file; `path` only names it in messages.
absl::StatusOr<std::map<std::string, CheckpointTensor>> ParseSafetensors(const std::string& file,
                                                                         const std::string& path);

// Writes `tensors` as a safetensors file (tensors in name order, 8-byte
// aligned header), each stored as `dtype`: "F32" or "F16" (rounded to
// nearest even). INVALID_ARGUMENT for another dtype or a tensor whose values
// do not match its shape; INTERNAL when the file cannot be written.
absl::Status WriteSafetensors(const std::string& path,
                              const std::map<std::string, CheckpointTensor>& tensors,
                              const std::string& dtype);

}  // namespace infer

#endif  // INFER_MODELS_CHECKPOINT_H_
