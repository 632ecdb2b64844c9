// OpenCalls<R>: the long-lived calls of one kind open on a gRPC server
// (ModelStreamInfer streams, Health.Watch watches), so that a drain can end
// them instead of letting gRPC's Shutdown wait for them until its deadline.
//
// R is a gRPC callback reactor that deletes itself in OnDone and provides:
//   void Start(bool ending)  begin (read or write), or finish at once when
//                            the server is ending; may delete the reactor
//   bool End()               the server ends: true if the caller must now
//                            call FinishEnded (it may not finish on its own
//                            any more); false if it finishes by itself
//   void FinishEnded()       calls Finish; may delete the reactor
// and calls Closed(this) from its OnDone before deleting itself.
//
// Invariant: a reactor is registered before it can finish, and is deleted
// only after its Finish; End marks the ones EndAll finishes, so no one else
// finishes them and the pointers stay valid until FinishEnded. Finish is
// never called under the set's lock (OnDone, which takes it, may run inline).
//
// Thread-safe.
#ifndef INFER_SERVER_GRPC_OPEN_CALLS_H_
#define INFER_SERVER_GRPC_OPEN_CALLS_H_

#include <mutex>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"

namespace infer {

template <typename R>
class OpenCalls {
 public:
  // Registers `call` and starts it (ending at once after EndAll). Returns
  // `call`, which may already be finished: not to be touched after.
  R* Open(R* call) {
    bool ending = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ending = ending_;
      open_.insert(call);
    }
    call->Start(ending);
    return call;
  }

  // Ends every open call and each one opened after this. Idempotent.
  void EndAll() {
    std::vector<R*> to_finish;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ending_ = true;
      for (R* call : open_) {
        if (call->End()) to_finish.push_back(call);
      }
    }
    for (R* call : to_finish) call->FinishEnded();
  }

  // Runs fn(call) for every open call, under the set's lock (fn must not
  // finish the call).
  template <typename Fn>
  void ForEach(Fn fn) {
    std::lock_guard<std::mutex> lock(mu_);
    for (R* call : open_) fn(call);
  }

  // From the call's OnDone.
  void Closed(R* call) {
    std::lock_guard<std::mutex> lock(mu_);
    open_.erase(call);
  }

 private:
  std::mutex mu_;
  absl::flat_hash_set<R*> open_ ABSL_GUARDED_BY(mu_);
  bool ending_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace infer

#endif  // INFER_SERVER_GRPC_OPEN_CALLS_H_
