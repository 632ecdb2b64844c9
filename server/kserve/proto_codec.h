// Conversion between KServe v2 protobuf messages and the engine's request and
// response types. All sizes a client declares are checked (overflow-safe)
// against the bytes actually received before anything proportional to them
// is allocated. Thread-compatible (plain functions).
#ifndef INFER_SERVER_KSERVE_PROTO_CODEC_H_
#define INFER_SERVER_KSERVE_PROTO_CODEC_H_

#include "absl/status/statusor.h"
#include "batching/batch_queue.h"
#include "grpc_service.pb.h"
#include "models/model.h"
#include "runtime/device.h"

namespace infer {

// Converts a ModelInferRequest. Raw input payloads are moved out of `proto`
// (not copied), so `proto` is left partly emptied. Errors are
// INVALID_ARGUMENT naming the input and the expected size or type:
// unknown datatype, negative or overflowing dims, raw_input_contents count
// or size mismatch, contents mixed with raw_input_contents, typed contents
// of the wrong length or kind, values out of the datatype's range, a
// "priority" or "timeout" (microseconds) parameter that is not a
// non-negative integer.
absl::StatusOr<InferRequest> RequestFromProto(inference::ModelInferRequest* proto);

// Fills `proto` with `response`, outputs as raw_output_contents.
void ResponseToProto(InferResponse response, inference::ModelInferResponse* proto);

// The model's configuration as Triton's ModelConfig: name, platform,
// backend, max_batch_size, inputs and outputs (dims without the batch
// dimension, which every model here has first; a tensor that is only a
// batch dimension, like BYTES `text` [-1], has no dims), one instance on
// `device`, dynamic_batching with the queue's delay, priorities, size and
// default timeout, and parameters["precision"] when the model computes in
// one.
void ModelConfigToProto(const ModelSpec& spec, const QueueOptions& queue, const DeviceInfo& device,
                        inference::ModelConfig* proto);

}  // namespace infer

#endif  // INFER_SERVER_KSERVE_PROTO_CODEC_H_
