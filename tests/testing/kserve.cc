#include "tests/testing/kserve.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>

#include "tests/testing/server_process.h"

namespace infer::testing {

ServerProcess* StartSharedServer(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"--device", "cpu"};
  all.insert(all.end(), args.begin(), args.end());
  absl::StatusOr<ServerProcess> server = ServerProcess::Start(ServerBinary(), all);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? new ServerProcess(*std::move(server)) : nullptr;
}

void StopSharedServer(ServerProcess** server) {
  if (*server == nullptr) return;
  absl::StatusOr<int> code = (*server)->Stop(SIGTERM);
  EXPECT_TRUE(code.ok() && *code == 0) << (*server)->log();
  delete *server;
  *server = nullptr;
}

using inference::GRPCInferenceService;

std::string ServerBinary() {
  const char* env = std::getenv("INFER_SERVER_BINARY");
  return env != nullptr && *env != '\0' ? env : INFER_SERVER_BINARY;
}

std::vector<std::vector<int64_t>> Rows(int rows, int length) {
  return std::vector<std::vector<int64_t>>(rows, std::vector<int64_t>(length, 7));
}

grpc::Status Infer(GRPCInferenceService::Stub* stub, const inference::ModelInferRequest& req,
                   inference::ModelInferResponse* resp) {
  inference::ModelInferResponse ignored;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return stub->ModelInfer(&ctx, req, resp != nullptr ? resp : &ignored);
}

inference::ModelInferRequest IdsRequest(const std::string& model,
                                        const std::vector<std::vector<int64_t>>& rows) {
  inference::ModelInferRequest req;
  req.set_model_name(model);
  auto* in = req.add_inputs();
  in->set_name("input_ids");
  in->set_datatype("INT64");
  in->add_shape(static_cast<int64_t>(rows.size()));
  in->add_shape(static_cast<int64_t>(rows[0].size()));
  std::string* raw = req.add_raw_input_contents();
  for (const auto& r : rows) {
    raw->append(reinterpret_cast<const char*>(r.data()), r.size() * sizeof(int64_t));
  }
  return req;
}

std::vector<grpc::Status> InferAll(GRPCInferenceService::Stub* stub,
                                   const std::vector<inference::ModelInferRequest>& requests,
                                   std::chrono::milliseconds timeout,
                                   std::vector<inference::ModelInferResponse>* responses) {
  struct Call {
    grpc::ClientContext ctx;
    inference::ModelInferResponse resp;
  };
  const size_t n = requests.size();
  std::vector<std::unique_ptr<Call>> calls;
  std::vector<grpc::Status> statuses(n);
  std::mutex mu;
  std::condition_variable cv;
  size_t remaining = n;
  for (size_t i = 0; i < n; ++i) {
    calls.push_back(std::make_unique<Call>());
    Call* c = calls.back().get();
    c->ctx.set_deadline(std::chrono::system_clock::now() + timeout);
    stub->async()->ModelInfer(&c->ctx, &requests[i], &c->resp, [&, i](grpc::Status s) {
      std::lock_guard<std::mutex> lock(mu);
      statuses[i] = std::move(s);
      if (--remaining == 0) cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return remaining == 0; });
  if (responses != nullptr) {
    responses->clear();
    for (auto& c : calls) responses->push_back(std::move(c->resp));
  }
  return statuses;
}

std::vector<grpc::StatusCode> Concurrent(GRPCInferenceService::Stub* stub,
                                         const inference::ModelInferRequest& proto, int n,
                                         std::atomic<int>* bad_outputs) {
  std::vector<inference::ModelInferRequest> requests(n, proto);
  for (int i = 0; i < n; ++i) requests[i].set_id(std::to_string(i));
  std::vector<inference::ModelInferResponse> responses;
  const std::vector<grpc::Status> statuses =
      InferAll(stub, requests, std::chrono::seconds(60), &responses);
  std::vector<grpc::StatusCode> codes(n);
  for (int i = 0; i < n; ++i) {
    codes[i] = statuses[i].error_code();
    if (statuses[i].ok() &&
        (responses[i].id() != std::to_string(i) || responses[i].raw_output_contents_size() != 1)) {
      ++*bad_outputs;
    }
  }
  return codes;
}

inference::ModelStatistics Stats(GRPCInferenceService::Stub* stub, const std::string& model) {
  grpc::ClientContext ctx;
  inference::ModelStatisticsRequest req;
  req.set_name(model);
  inference::ModelStatisticsResponse resp;
  EXPECT_TRUE(stub->ModelStatistics(&ctx, req, &resp).ok());
  return resp.model_stats_size() == 1 ? resp.model_stats(0) : inference::ModelStatistics();
}

}  // namespace infer::testing
