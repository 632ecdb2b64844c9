// The bytes of a ModelInferRequest, as gRPC hands them to the server, through
// everything the server does to a request before it is queued: the version,
// the declared limits, decoding (DecodeInferRequest), then admission
// (AdmitRequest: the limits on the decoded tensors, the model's spec,
// tokenisation of text, sequence length and token limits, priority and
// deadline, device memory). Whatever the bytes, each step either passes or
// refuses with a status; nothing crashes, reads out of bounds, or allocates
// in proportion to a size the client merely declared.
//
// The models are fuzz/served_models.h's. The seed corpus (fuzz/corpus/
// infer_request_fuzz) holds valid requests for both.
#include <cstddef>
#include <cstdint>

#include "fuzz/served_models.h"
#include "grpc_service.pb.h"
#include "server/grpc_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  infer::fuzzing::Served& served = infer::fuzzing::ServedModels();
  inference::ModelInferRequest proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  absl::StatusOr<infer::InferRequest> request = infer::DecodeInferRequest(*served.engine, &proto);
  if (request.ok()) infer::fuzzing::AdmitServed(*std::move(request));
  return 0;
}
