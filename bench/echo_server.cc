// echo-server: the baseline for bench/frontend_overhead.py. A bare gRPC
// server of the same KServe v2 service (callback API, like infer-server)
// whose ModelInfer answers at once with each input copied to an output
// (`input_ids` → `output_ids`, same shape, datatype and bytes): protocol
// decoding, one copy and encoding, and nothing else — no validation,
// queue, batching or pipeline.
//
//   build/bin/echo-server [--grpc-address 127.0.0.1:0]
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <limits>

#include "absl/synchronization/mutex.h"
#include "grpc_service.grpc.pb.h"

namespace {

class EchoService final : public inference::GRPCInferenceService::CallbackService {
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* ctx,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override {
    response->set_model_name(request->model_name());
    response->set_model_version("1");
    response->set_id(request->id());
    for (int i = 0; i < request->inputs_size(); ++i) {
      const auto& in = request->inputs(i);
      auto* out = response->add_outputs();
      out->set_name(in.name() == "input_ids" ? "output_ids" : in.name());
      out->set_datatype(in.datatype());
      *out->mutable_shape() = in.shape();
      if (i < request->raw_input_contents_size()) {
        *response->add_raw_output_contents() = request->raw_input_contents(i);
      }
    }
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

}  // namespace

int main(int argc, char** argv) {
  // As infer-server does (see server/main.cc): Debian's Abseil leaves
  // absl::Mutex deadlock detection on; both servers turn it off, so the
  // baseline pays no cost the server does not.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::string address = "127.0.0.1:0";
  CLI::App app{"echo-server: a bare KServe v2 ModelInfer echo, the front-end baseline"};
  app.add_option("--grpc-address", address, "host:port (port 0 picks a free port)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  EchoService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(std::numeric_limits<int>::max());
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "echo-server: cannot listen on %s\n", address.c_str());
    return 1;
  }
  std::printf("echo-server listening on %s:%d\n", address.substr(0, address.rfind(':')).c_str(),
              port);
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  return 0;
}
