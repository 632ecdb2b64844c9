// The Model thread-safety contract (models/model.h), held against every
// built-in model: admission (AdmitRequest, which calls each const method the
// contract names: the declared limits, Preprocess, ValidateRequest,
// SequenceLength, RealTokens, PeakBytes) runs on several threads at once
// while another thread plans batches (PeakBytes, ComputedTokens) and
// prepares and runs them, as the engine's front-end and batcher threads do.
// Every thread must get exactly what one thread alone gets. Under
// ThreadSanitizer (INFER_SANITIZE=thread) the same test finds a model that
// writes shared state from a const method.
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/request_admission.h"
#include "models/bert/bert_gen.h"
#include "models/bert/bert_model.h"
#include "models/embed_pool/embed_pool.h"
#include "models/identity/identity.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tensors.h"
#include "tests/testing/test_device.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::TestDevice;
using ::infer::testing::TextTensor;

InferRequest Request(const std::string& model, std::vector<Tensor> inputs) {
  InferRequest r;
  r.model_name = model;
  r.inputs = std::move(inputs);
  return r;
}

// What admission made of a request: enough to tell two runs apart.
struct Admitted {
  absl::StatusCode code = absl::StatusCode::kOk;
  std::string message;
  int64_t rows = 0, seq_length = 0, real_tokens = 0, peak = 0, computed = 0;
  int bucket = 0;
  std::vector<std::string> inputs;  // after Preprocess
  bool operator==(const Admitted&) const = default;
};

struct Case {
  std::unique_ptr<Model> model;
  std::vector<InferRequest> requests;
  QueueOptions batching;
  RequestLimits limits;
};

Admitted Admit(const Case& c, const MemoryAdmission& memory, InferRequest request) {
  const AdmissionPolicy policy{c.model.get(), &c.batching, &c.limits, &memory};
  AdmittedRequest a;
  RefusalReason reason;
  InferRequestSource source(std::move(request));
  const absl::Status s = AdmitRequest(policy, absl::UnixEpoch(), source, &request, &a, &reason);
  Admitted out;
  out.code = s.code();
  out.message = std::string(s.message());
  if (!s.ok()) return out;
  out.rows = a.rows;
  out.seq_length = a.seq_length;
  out.real_tokens = a.real_tokens;
  out.bucket = a.bucket;
  out.peak = c.model->PeakBytes(a.shape());
  out.computed = c.model->ComputedTokens(a.shape());
  for (const Tensor& t : request.inputs) out.inputs.push_back(t.data);
  return out;
}

// The outputs of one batch of every request that admission accepts.
std::vector<std::string> RunAll(Case& c, TestDevice& device, const MemoryAdmission& memory) {
  std::vector<InferRequest> admitted;
  for (const InferRequest& r : c.requests) {
    InferRequestSource source(r);
    InferRequest copy;
    const AdmissionPolicy policy{c.model.get(), &c.batching, &c.limits, &memory};
    AdmittedRequest a;
    RefusalReason reason;
    if (AdmitRequest(policy, absl::UnixEpoch(), source, &copy, &a, &reason).ok()) {
      admitted.push_back(std::move(copy));
    }
  }
  std::vector<const InferRequest*> in;
  std::vector<InferResponse> responses(admitted.size());
  std::vector<InferResponse*> out;
  for (size_t i = 0; i < admitted.size(); ++i) {
    in.push_back(&admitted[i]);
    out.push_back(&responses[i]);
  }
  EXPECT_THAT(RunBatch(*c.model, device.device.get(), device.stream.get(), in, out), IsOk());
  std::vector<std::string> data;
  for (const InferResponse& r : responses) {
    for (const Tensor& t : r.outputs) data.push_back(t.data);
  }
  return data;
}

class ModelConcurrencyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = TestDevice::Create("cpu");
    ASSERT_THAT(d, IsOk());
    device_ = *std::move(d);
    dir_ = absl::StrCat(::testing::TempDir(), "/model_concurrency_", getpid());
    BertGenOptions gen;
    gen.config = *BertPreset("tiny");
    ASSERT_THAT(GenerateBertCheckpoint(dir_, gen), IsOk());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::vector<Case> Cases() {
    std::vector<Case> cases;
    auto ids = [](const std::string& model) {
      return std::vector<InferRequest>{
          Request(model, {testing::Int64Matrix("input_ids", {1, 2, 3, 4, 5, 6}, 2)}),
          Request(model, {testing::Int64Matrix("input_ids", {7, 0, 0}, 1)}),
          Request(model, {testing::Int64Matrix("input_ids", std::vector<int64_t>(40, 9), 4)}),
          Request(model, {testing::Int64Matrix("input_ids", {-1, 2}, 1)}),  // refused
          Request(model, {testing::Int64Matrix("wrong", {1, 2}, 1)}),       // refused
      };
    };
    {
      Case c;
      EmbedPoolOptions o;
      o.vocab_size = 100;
      auto m = EmbedPoolModel::Create(o, device_->context());
      EXPECT_THAT(m, IsOk());
      c.model = *std::move(m);
      c.requests = ids("embed_pool");
      cases.push_back(std::move(c));
    }
    {
      Case c;
      c.model = std::make_unique<IdentityModel>("identity");
      c.requests = ids("identity");
      cases.push_back(std::move(c));
    }
    {
      Case c;
      BertModelOptions o;
      o.checkpoint_dir = dir_;
      o.precision = Precision::kFp32;
      auto m = BertModel::Create(o, device_->context());
      EXPECT_THAT(m, IsOk());
      c.model = *std::move(m);
      c.requests = ids("bert");
      c.requests.push_back(Request("bert", {TextTensor({"hello world", "a b c d e f g h"})}));
      c.requests.push_back(Request("bert", {TextTensor({"caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87"})}));
      c.requests.push_back(
          Request("bert", {TextTensor({std::string(3000, 'x')})}));  // over the limit
      c.requests.push_back(
          Request("bert", {testing::Int64Matrix("input_ids", {2, 5, 6, 3, 2, 7, 3, 0}, 2),
                           testing::Int64Matrix("attention_mask", {1, 1, 1, 1, 1, 1, 1, 0}, 2)}));
      c.limits.max_text_bytes = 2048;
      cases.push_back(std::move(c));
    }
    for (Case& c : cases) c.batching.length_buckets = {4, 16, 64};
    return cases;
  }

  std::unique_ptr<TestDevice> device_;
  std::string dir_;
};

TEST_F(ModelConcurrencyTest, AdmissionOnManyThreadsWhileBatchesRunGivesTheSerialAnswers) {
  const MemoryAdmission memory(int64_t{1} << 30, 0);
  for (Case& c : Cases()) {
    SCOPED_TRACE(c.model->spec().name);
    std::vector<Admitted> serial;
    for (const InferRequest& r : c.requests) serial.push_back(Admit(c, memory, r));
    int accepted = 0;
    for (const Admitted& a : serial) accepted += a.code == absl::StatusCode::kOk;
    ASSERT_GE(accepted, 3) << "the cases must reach the model";
    ASSERT_LT(accepted, static_cast<int>(serial.size())) << "and its refusals";
    const std::vector<std::string> outputs = RunAll(c, *device_, memory);

    std::atomic<int> mismatches{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> admitters;
    for (int t = 0; t < 6; ++t) {
      admitters.emplace_back([&, t] {
        for (int round = 0; round < 40; ++round) {
          for (size_t i = 0; i < c.requests.size(); ++i) {
            const size_t k = (i + t) % c.requests.size();  // each thread its own order
            if (!(Admit(c, memory, c.requests[k]) == serial[k])) ++mismatches;
          }
        }
      });
    }
    std::thread runner([&] {
      while (!stop) {
        if (RunAll(c, *device_, memory) != outputs) ++mismatches;
        // What the batch queue asks while it plans.
        for (int64_t rows = 1; rows <= 4; ++rows) {
          (void)c.model->PeakBytes({rows, rows * 3, 7});
          (void)c.model->ComputedTokens({rows, rows * 3, 7});
        }
      }
    });
    for (std::thread& t : admitters) t.join();
    stop = true;
    runner.join();
    EXPECT_EQ(mismatches.load(), 0);
  }
}

}  // namespace
}  // namespace infer
