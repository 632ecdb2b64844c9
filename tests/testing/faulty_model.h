// FaultyModel: a real model behind a wrapper that fails or slows the batches
// holding a marked request, at the stage a test chooses, so that the engine
// and the gRPC server can be tested against a model that breaks in the
// middle of serving. A request is marked by the start of its id (the KServe
// request id). Test-only; nothing in the server refers to it.
//
// - Failures (FaultRule): a batch holding a request whose id starts with the
//   rule's prefix fails at the rule's stage with INTERNAL "injected <stage>
//   fault", or, for kComputeThrows, Compute throws std::runtime_error. An
//   empty prefix marks every request (a model whose every Prepare fails).
// - Time: every batch's Compute takes at least `compute_time` (it sleeps
//   what the inner model's compute left of it); a batch holding a request
//   whose id starts with `slow_prefix` takes `slow_factor` times as long.
// - Whole batches: the first `fail_first_batches` batches fail at Compute,
//   whatever they hold; ThrowNextPrepare makes the next Prepare throw;
//   LoseDevice makes every later Compute fail with a lost device's error
//   (DeviceLostError), as a GPU does after a sticky error.
// - Records the ids of every batch a fault hit, and counts the slow batches
//   that have started.
//
// Thread-safety: as Model (the records are guarded).
#ifndef INFER_TESTS_TESTING_FAULTY_MODEL_H_
#define INFER_TESTS_TESTING_FAULTY_MODEL_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "models/model.h"
#include "runtime/device.h"

namespace infer::testing {

enum class FaultStage { kPrepare, kUpload, kCompute, kComputeThrows, kDownload, kFinish };

inline const char* FaultStageName(FaultStage stage) {
  switch (stage) {
    case FaultStage::kPrepare:
      return "prepare";
    case FaultStage::kUpload:
      return "upload";
    case FaultStage::kCompute:
    case FaultStage::kComputeThrows:
      return "compute";
    case FaultStage::kDownload:
      return "download";
    case FaultStage::kFinish:
      return "finish";
  }
  return "?";
}

struct FaultRule {
  std::string id_prefix;
  FaultStage stage = FaultStage::kCompute;
};

struct FaultyModelOptions {
  std::string name;  // served name; empty: the inner model's
  std::vector<FaultRule> failures;
  absl::Duration compute_time = absl::ZeroDuration();
  std::string slow_prefix;  // empty: no slow batches
  double slow_factor = 10.0;
  int fail_first_batches = 0;
};

class FaultyModel final : public Model {
 public:
  FaultyModel(std::unique_ptr<Model> inner, FaultyModelOptions options)
      : inner_(std::move(inner)), options_(std::move(options)), spec_(inner_->spec()) {
    if (!options_.name.empty()) spec_.name = options_.name;
  }

  // The ids of each batch a fault hit, in the order the faults fired.
  std::vector<std::vector<std::string>> faulted_batches() const {
    std::lock_guard<std::mutex> lock(mu_);
    return faulted_;
  }
  int slow_batches_started() const { return slow_started_.load(); }
  // The next Prepare throws std::runtime_error("injected exception in
  // prepare").
  void ThrowNextPrepare() { throw_next_ = true; }
  // From now on every Compute fails with DeviceLostError("injected loss of
  // the device").
  void LoseDevice() { lost_ = true; }

  const ModelSpec& spec() const override { return spec_; }
  absl::Status Preprocess(InferRequest* request) const override {
    return inner_->Preprocess(request);
  }
  absl::Status ValidateRequest(const InferRequest& request) const override {
    return inner_->ValidateRequest(request);
  }
  int64_t SequenceLength(const InferRequest& request) const override {
    return inner_->SequenceLength(request);
  }
  int64_t RealTokens(const InferRequest& request) const override {
    return inner_->RealTokens(request);
  }
  int64_t DeclaredSequenceLength(absl::Span<const DeclaredInput> inputs) const override {
    return inner_->DeclaredSequenceLength(inputs);
  }
  int64_t PeakBytes(const BatchShape& shape) const override { return inner_->PeakBytes(shape); }
  int64_t ComputedTokens(const BatchShape& shape) const override {
    return inner_->ComputedTokens(shape);
  }
  int64_t WeightBytes() const override { return inner_->WeightBytes(); }
  bool UsesDevice() const override { return inner_->UsesDevice(); }

  absl::StatusOr<std::unique_ptr<ModelBatch>> Prepare(
      absl::Span<const InferRequest* const> requests) override {
    if (throw_next_.exchange(false)) throw std::runtime_error("injected exception in prepare");
    std::vector<std::string> ids;
    bool slow = false;
    const FaultRule* rule = nullptr;
    if (batches_.fetch_add(1) < options_.fail_first_batches) rule = &kEveryBatch;
    for (const InferRequest* r : requests) {
      ids.push_back(r->id);
      if (!options_.slow_prefix.empty() && absl::StartsWith(r->id, options_.slow_prefix)) {
        slow = true;
      }
      for (const FaultRule& f : options_.failures) {
        if (rule == nullptr && absl::StartsWith(r->id, f.id_prefix)) rule = &f;
      }
    }
    if (rule != nullptr && rule->stage == FaultStage::kPrepare) return Fault(*rule, ids);
    absl::StatusOr<std::unique_ptr<ModelBatch>> inner = inner_->Prepare(requests);
    if (!inner.ok()) return inner.status();
    const absl::Duration time =
        slow ? options_.compute_time * options_.slow_factor : options_.compute_time;
    return std::unique_ptr<ModelBatch>(
        new Batch(this, *std::move(inner), rule, std::move(ids), time, slow));
  }

 private:
  class Batch final : public ModelBatch {
   public:
    Batch(FaultyModel* model, std::unique_ptr<ModelBatch> inner, const FaultRule* rule,
          std::vector<std::string> ids, absl::Duration time, bool slow)
        : model_(model),
          inner_(std::move(inner)),
          rule_(rule),
          ids_(std::move(ids)),
          time_(time),
          slow_(slow) {}
    absl::Status Upload(Stream* stream) override {
      if (Hit(FaultStage::kUpload)) return model_->Fault(*rule_, ids_);
      return inner_->Upload(stream);
    }
    absl::Status Compute(Stream* stream) override {
      if (slow_) ++model_->slow_started_;
      const absl::Time start = absl::Now();
      if (Hit(FaultStage::kComputeThrows)) {
        model_->Fault(*rule_, ids_).IgnoreError();  // recorded; thrown instead
        throw std::runtime_error("injected exception in compute");
      }
      if (model_->lost_) return DeviceLostError("injected loss of the device");
      if (Hit(FaultStage::kCompute)) return model_->Fault(*rule_, ids_);
      const absl::Status s = inner_->Compute(stream);
      absl::SleepFor(time_ - (absl::Now() - start));
      return s;
    }
    absl::Status Download(Stream* stream) override {
      if (Hit(FaultStage::kDownload)) return model_->Fault(*rule_, ids_);
      return inner_->Download(stream);
    }
    absl::Status Finish(absl::Span<InferResponse* const> responses) override {
      if (Hit(FaultStage::kFinish)) return model_->Fault(*rule_, ids_);
      return inner_->Finish(responses);
    }

   private:
    bool Hit(FaultStage stage) const { return rule_ != nullptr && rule_->stage == stage; }
    FaultyModel* const model_;
    const std::unique_ptr<ModelBatch> inner_;
    const FaultRule* const rule_;
    const std::vector<std::string> ids_;
    const absl::Duration time_;
    const bool slow_;
  };

  // Records the hit and returns its error.
  absl::Status Fault(const FaultRule& rule, const std::vector<std::string>& ids) {
    std::lock_guard<std::mutex> lock(mu_);
    faulted_.push_back(ids);
    return absl::InternalError(absl::StrCat("injected ", FaultStageName(rule.stage), " fault"));
  }

  // The rule of a batch among the first fail_first_batches.
  static inline const FaultRule kEveryBatch{"", FaultStage::kCompute};

  const std::unique_ptr<Model> inner_;
  const FaultyModelOptions options_;
  ModelSpec spec_;
  mutable std::mutex mu_;
  std::vector<std::vector<std::string>> faulted_;
  std::atomic<int> slow_started_{0};
  std::atomic<int> batches_{0};
  std::atomic<bool> throw_next_{false};
  std::atomic<bool> lost_{false};
};

}  // namespace infer::testing

#endif  // INFER_TESTS_TESTING_FAULTY_MODEL_H_
