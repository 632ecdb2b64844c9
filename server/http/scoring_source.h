// The request source behind the rerank and classification routes
// (server/http/scoring_routes.h): reads a TEI /rerank or /predict body, or a
// Cohere v1/v2 rerank body, in place, declares it to the engine and decodes
// it into the model's text inputs:
//
//   rerank (TEI, Cohere): `query` [1] and `documents` [N]
//   predict (TEI):        `text` [N], with `text_pair` [N] for pairs
//
// A TEI /predict batch may mix single texts and pairs ([["a"], ["a", "b"]]).
// The model's inputs cannot say per row whether it has a second text, so
// such a batch is served as two requests, one per kind: a ScoringCall with
// `kind` set takes only the rows of that kind (and records where they stand
// in the batch, `rows`), and the route joins the two answers
// (PredictBatch says whether a body needs it).
//
// Thread-compatible: a source and its call are used by one request at a
// time. Ownership: the source borrows its ScoringCall, which outlives it;
// the call shares the parsed body with the answer.
#ifndef INFER_SERVER_HTTP_SCORING_SOURCE_H_
#define INFER_SERVER_HTTP_SCORING_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "engine/request_source.h"
#include "models/model.h"

namespace infer {

enum class ScoringApi { kTeiRerank, kTeiPredict, kCohereV1, kCohereV2 };

inline bool IsRerank(ScoringApi api) { return api != ScoringApi::kTeiPredict; }
inline bool IsCohere(ScoringApi api) {
  return api == ScoringApi::kCohereV1 || api == ScoringApi::kCohereV2;
}

// What the answer needs, filled as the engine has the request declared and
// decoded.
struct ScoringCall {
  explicit ScoringCall(ScoringApi a) : api(a) {}
  const ScoringApi api;
  std::shared_ptr<const nlohmann::json> doc;  // the body, read in place by the source
  std::vector<std::string> labels;            // the scores output's, in order
  bool multi_label = false;                   // ...each through a sigmoid (TensorSpec)
  bool raw_scores = false;
  bool return_text = false;
  int64_t top_n = -1;  // Cohere, and predict's top_k: the results to return; -1: all
  // predict's function_to_apply: "sigmoid", "softmax", "none"; empty: by
  // the number of labels.
  std::string function;
  bool single = false;  // predict: one input, answered as one list
  bool empty = false;   // refused for an empty list (TEI's "Empty")
  // predict: the rows of the batch this call takes (0: all of them, which
  // must then be of one kind; 1: the single texts; 2: the pairs), and the
  // place of each in the batch, in the order they are sent.
  int kind = 0;
  std::vector<size_t> rows;
  // The documents (rerank) as the body gave them, for return_text.
  std::vector<const nlohmann::json*> documents;
};

// What a TEI /predict body's batch holds ("inputs": [[..], ..]): whether it
// has single texts, pairs, or both; its rows and the bytes of its texts in
// the engine's 4-byte-length layout, for the whole batch's limits. All zero
// for a body that is not a batch; malformed rows are not counted (the
// source refuses them).
struct PredictBatchShape {
  bool singles = false;
  bool pairs = false;
  int64_t rows = 0;
  int64_t text_bytes = 0;
};
PredictBatchShape PredictBatch(const nlohmann::json& doc);

// The model's `scores` output, FP32 [-1, labels], or null.
const TensorSpec* ScoresOutput(const ModelSpec& spec);

class ScoringSource final : public RequestSource {
 public:
  ScoringSource(std::string model, ScoringCall* call) : model_(std::move(model)), call_(call) {}
  const std::string& model_name() const override { return model_; }
  absl::Status Declare(const ModelSpec& spec, DeclaredRequest* declared) override;
  absl::Status Decode(const ModelSpec& spec, InferRequest* request) override;

 private:
  absl::Status DeclareRerank(DeclaredRequest* declared);
  absl::Status DeclarePredict(DeclaredRequest* declared);

  std::string model_;
  ScoringCall* call_;  // borrowed
  // From Declare, for Decode: views into the call's body.
  const char* first_name_ = "";
  const char* second_name_ = "";
  std::vector<const std::string*> firsts_, seconds_;
  std::vector<int64_t> shape_first_, shape_second_;
  std::optional<bool> truncate_;
  bool left_ = false;
};

}  // namespace infer

#endif  // INFER_SERVER_HTTP_SCORING_SOURCE_H_
