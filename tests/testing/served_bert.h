// A served embedding model (BertModel: any transformer folder) on one test
// device, admitted and run as the engine does it (spec checks, Preprocess,
// ValidateRequest, then one batch), for tests that need no Engine.
#ifndef INFER_TESTS_TESTING_SERVED_BERT_H_
#define INFER_TESTS_TESTING_SERVED_BERT_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "models/bert/bert_model.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/test_device.h"

namespace infer::testing {

class ServedBert {
 public:
  // `device_spec` as for CreateDevice ("cpu", "cuda:0"). A model that fails
  // to load leaves ok() false and status() saying why.
  ServedBert(const std::string& device_spec, const BertModelOptions& options) {
    auto d = TestDevice::Create(device_spec);
    EXPECT_THAT(d, IsOk());
    if (!d.ok()) {
      status_ = d.status();
      return;
    }
    device_ = *std::move(d);
    auto m = BertModel::Create(options, device_->context());
    status_ = m.status();
    if (m.ok()) model_ = *std::move(m);
  }
  bool ok() const { return model_ != nullptr; }
  const absl::Status& status() const { return status_; }
  BertModel& model() { return *model_; }
  TestDevice& device() { return *device_; }

  // Spec checks + Preprocess + ValidateRequest, as the engine does them.
  absl::Status Admit(InferRequest* r) {
    absl::Status s = ValidateRequestAgainstSpec(model_->spec(), *r);
    if (s.ok()) s = model_->Preprocess(r);
    if (s.ok()) s = model_->ValidateRequest(*r);
    return s;
  }
  // One request admitted and run as a batch alone: its response.
  InferResponse RunAlone(InferRequest r) {
    EXPECT_THAT(Admit(&r), IsOk());
    InferResponse out;
    const InferRequest* in[] = {&r};
    InferResponse* res[] = {&out};
    EXPECT_THAT(RunBatch(*model_, device_->device.get(), device_->stream.get(), in, res), IsOk());
    return out;
  }
  // The first output, [rows, width], of one request run as a batch alone.
  std::vector<float> Run(InferRequest r) {
    const InferResponse out = RunAlone(std::move(r));
    if (out.outputs.empty()) return {};
    const Tensor& e = out.outputs.at(0);
    return std::vector<float>(e.as<float>(), e.as<float>() + e.shape[0] * e.shape[1]);
  }

 private:
  std::unique_ptr<TestDevice> device_;
  std::unique_ptr<BertModel> model_;
  absl::Status status_;
};

}  // namespace infer::testing

#endif  // INFER_TESTS_TESTING_SERVED_BERT_H_
