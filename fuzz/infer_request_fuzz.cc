// The bytes of a ModelInferRequest, as gRPC hands them to the server, through
// everything the server does to a request before it is queued: the version,
// the declared limits, decoding (ProtoRequestSource), then the rest of
// admission (AdmitRequest: the model's spec,
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
#include "server/kserve/proto_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  inference::ModelInferRequest proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  infer::ProtoRequestSource source(&proto);
  (void)infer::fuzzing::AdmitServed(source);
  return 0;
}
