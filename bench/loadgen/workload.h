// What infer-bench sends: the sequence-length mix and the KServe requests it
// builds for each length (token ids, or text that tokenizes to that length).
#ifndef INFER_BENCH_LOADGEN_WORKLOAD_H_
#define INFER_BENCH_LOADGEN_WORKLOAD_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpc_service.pb.h"

namespace infer::loadgen {

// Sequence lengths to draw from, parsed from
//   "128"                      every request 128 tokens
//   "16-512"                   uniform over [16, 512]
//   "16:0.7,128:0.2,512:0.1"   weighted mix (weights need not sum to 1)
class LengthMix {
 public:
  // INVALID_ARGUMENT quoting the text and the rule it breaks.
  static absl::StatusOr<LengthMix> Parse(const std::string& text);
  int64_t Sample(std::mt19937_64& rng) const;
  int64_t max_length() const;
  // Every length Sample() can return, ascending.
  std::vector<int64_t> Values() const;
  std::string ToString() const;

 private:
  int64_t lo_ = 0, hi_ = 0;       // uniform range when lengths_ is empty
  std::vector<int64_t> lengths_;  // weighted mix otherwise
  std::vector<double> weights_;
};

enum class InputKind { kTokenIds, kText };

// How requests name and type their inputs, so that models other than
// infer-server's can be driven (e.g. a Triton BERT taking INT32 input_ids,
// attention_mask and token_type_ids, or a text model with a [batch, 1] BYTES
// input).
struct RequestFormat {
  InputKind kind = InputKind::kTokenIds;
  // The ids or text input's name; empty: "input_ids" or "text".
  std::string input_name;
  // Token ids only: the datatype of the ids (and of the inputs below),
  // "INT64" or "INT32".
  std::string ids_datatype = "INT64";
  // Token ids only: when set, one more input of this name and the ids'
  // shape and datatype, all ones (an attention mask) ...
  std::string mask_input;
  // ... and all zeros (token type ids).
  std::string type_ids_input;
  // Text only: shape [batch, 1] rather than [batch].
  bool text_column = false;

  // The input's name as sent.
  std::string InputName() const;
  // Bytes of one request of `batch` rows of `length` tokens, at most.
  int64_t MaxRequestBytes(int64_t batch, int64_t length) const;
};
// INVALID_ARGUMENT naming the option that does not fit.
absl::Status ValidateRequestFormat(const RequestFormat& format);

// Builds (once per length) and keeps the requests: read-only afterwards, so
// many calls may send the same message at once. Thread-safe.
class RequestPool {
 public:
  RequestPool(std::string model, RequestFormat format, int64_t batch)
      : model_(std::move(model)), format_(std::move(format)), batch_(batch) {}
  // The request for sequences of `length` tokens: `input_ids` [batch,
  // length] of [CLS]=101 ... [SEP]=102 with ids in [1000, 2000) between
  // (plus the mask and type ids the format asks for), or BYTES `text` [batch]
  // of length-2 words ("hello", one WordPiece token each, plus [CLS] and
  // [SEP]).
  const inference::ModelInferRequest& Get(int64_t length);
  int64_t batch() const { return batch_; }

 private:
  const std::string model_;
  const RequestFormat format_;
  const int64_t batch_;
  std::mutex mu_;
  std::map<int64_t, std::unique_ptr<inference::ModelInferRequest>> by_length_;
};

}  // namespace infer::loadgen

#endif  // INFER_BENCH_LOADGEN_WORKLOAD_H_
