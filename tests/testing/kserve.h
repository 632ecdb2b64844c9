// Client-side helpers for the integration tests that drive infer-server
// over loopback gRPC with the generated KServe v2 stub.
#ifndef INFER_TESTS_TESTING_KSERVE_H_
#define INFER_TESTS_TESTING_KSERVE_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "grpc_service.grpc.pb.h"
#include "tests/testing/temp_dir.h"

namespace infer::testing {

// The server binary: $INFER_SERVER_BINARY if set (e.g. when the tests run
// from a copied bundle), else the one this build produced.
std::string ServerBinary();

// One server for a whole test suite (SetUpTestSuite / TearDownTestSuite):
// StartSharedServer starts the server binary with `args` on the CPU
// (nullptr, with a test failure, when it cannot start); StopSharedServer
// sends SIGTERM, expects exit 0 (a failure shows the server's log), deletes
// it and sets *server to nullptr. Nothing for a nullptr.
class ServerProcess;
ServerProcess* StartSharedServer(const std::vector<std::string>& args);
void StopSharedServer(ServerProcess** server);

// `rows` rows of `length` ids (all 7).
std::vector<std::vector<int64_t>> Rows(int rows, int length);

// One ModelInfer call with a 30 s deadline.
grpc::Status Infer(inference::GRPCInferenceService::Stub* stub,
                   const inference::ModelInferRequest& req,
                   inference::ModelInferResponse* resp = nullptr);

// An INT64 input_ids request of the given rows (all of one length).
inference::ModelInferRequest IdsRequest(const std::string& model,
                                        const std::vector<std::vector<int64_t>>& rows);

// Sends every request at once, each with `timeout` as its deadline, and
// waits for all: their statuses, and the responses in *responses (if not
// null), in the order of `requests`.
std::vector<grpc::Status> InferAll(inference::GRPCInferenceService::Stub* stub,
                                   const std::vector<inference::ModelInferRequest>& requests,
                                   std::chrono::milliseconds timeout,
                                   std::vector<inference::ModelInferResponse>* responses = nullptr);

// Sends `n` copies of `proto` at once (ids "0".."n-1") and waits for all;
// the status codes by id. Counts in *bad_outputs the OK answers whose id or
// output count is wrong.
std::vector<grpc::StatusCode> Concurrent(inference::GRPCInferenceService::Stub* stub,
                                         const inference::ModelInferRequest& proto, int n,
                                         std::atomic<int>* bad_outputs);

// ModelStatistics of one model (empty when the call fails, which it flags).
inference::ModelStatistics Stats(inference::GRPCInferenceService::Stub* stub,
                                 const std::string& model);

}  // namespace infer::testing

#endif  // INFER_TESTS_TESTING_KSERVE_H_
