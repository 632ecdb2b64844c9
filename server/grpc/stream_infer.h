// ModelStreamInfer, the bidirectional streaming call, and the set of streams
// open on a server (so a drain can end them).
//
// - Each request read from a stream is submitted to the engine at once;
//   answers are written as they complete (not necessarily in request order:
//   clients match them by id, as with Triton), one write at a time. A
//   request's error is an answer with error_message set.
// - A stream ends OK once the client has closed its side and every request
//   is answered and written.
// - Bounded: at most kMaxInFlight requests of one stream are unanswered or
//   unwritten at once; beyond that the reactor stops reading, so a client
//   that sends without reading cannot grow the server's memory.
// - Drain (EndAll): every open stream stops reading and, once what it has
//   read is answered and written, ends UNAVAILABLE ("open a new stream"), so
//   an idle stream cannot hold a drain until its timeout; a stream opened
//   after EndAll ends at once the same way.
// - A reactor deletes itself when gRPC is done with it (OnDone), which
//   cannot happen before its Finish, and Finish waits for the last engine
//   callback.
//
// Thread-safe.
#ifndef INFER_SERVER_GRPC_STREAM_INFER_H_
#define INFER_SERVER_GRPC_STREAM_INFER_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>

#include "engine/engine.h"
#include "grpc_service.grpc.pb.h"
#include "server/grpc/open_calls.h"

namespace infer {

class InferStreams {
 public:
  using Reactor =
      grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>;
  static constexpr int64_t kMaxInFlight = 256;

  // `engine` is borrowed and outlives every stream.
  explicit InferStreams(Engine* engine) : engine_(engine) {}
  // Every stream must be done (the gRPC server shut down) first.
  ~InferStreams() = default;

  // The reactor of a new ModelStreamInfer call; gRPC runs it and it deletes
  // itself.
  Reactor* Open(grpc::CallbackServerContext* ctx);
  // Ends every stream as described above. Idempotent.
  void EndAll();

 private:
  class StreamReactor;

  Engine* const engine_;
  OpenCalls<StreamReactor> open_;
};

}  // namespace infer

#endif  // INFER_SERVER_GRPC_STREAM_INFER_H_
