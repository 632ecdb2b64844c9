// ArenaMessageAllocator: gRPC's message allocator for a callback unary
// method (e.g. GRPCInferenceService::ModelInfer) that puts each call's
// request and response on one protobuf Arena, whose first block lies inside
// the allocation that holds them.
//
// Without it gRPC creates the two messages on the heap, and every string
// object, repeated field and sub-message they hold (an inference call has
// about 20: names, datatypes, shapes, one message per tensor) is a heap
// allocation of its own, freed one by one. On the arena they are carved out
// of the block and freed together when the call ends. A string's characters
// beyond the small-string buffer still live on the heap (std::string's own
// allocator), so a payload moved out of the request (ProtoRequestSource) or
// swapped into the response (ResponseToProto) is not copied.
//
// Thread-safe (gRPC calls AllocateMessages from any of its threads); must
// outlive the server it is registered with.
#ifndef INFER_SERVER_GRPC_ARENA_MESSAGES_H_
#define INFER_SERVER_GRPC_ARENA_MESSAGES_H_

#include <google/protobuf/arena.h>
#include <grpcpp/support/message_allocator.h>

#include <cstddef>

namespace infer {

template <typename Request, typename Response>
class ArenaMessageAllocator final : public grpc::MessageAllocator<Request, Response> {
 public:
  grpc::MessageHolder<Request, Response>* AllocateMessages() override { return new Holder(); }

 private:
  // A call's request and response, on an arena whose first block is
  // `block_`: a call that fits in it makes no allocation beyond this one.
  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    Holder() : arena_(Options(block_)) {
      this->set_request(google::protobuf::Arena::CreateMessage<Request>(&arena_));
      this->set_response(google::protobuf::Arena::CreateMessage<Response>(&arena_));
    }
    // gRPC's end of the call: the messages go with the arena.
    void Release() override { delete this; }

   private:
    static google::protobuf::ArenaOptions Options(char* block) {
      google::protobuf::ArenaOptions o;
      o.initial_block = block;
      o.initial_block_size = kBlockBytes;
      return o;
    }
    // Enough for a call of a few tensors (the messages, names, shapes and
    // the arena's own bookkeeping); a larger one adds blocks as it grows.
    static constexpr size_t kBlockBytes = 2048;
    alignas(std::max_align_t) char block_[kBlockBytes];
    google::protobuf::Arena arena_;  // after block_, which it uses
  };
};

}  // namespace infer

#endif  // INFER_SERVER_GRPC_ARENA_MESSAGES_H_
