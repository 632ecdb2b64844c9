// Small tensor builders (and one finder) for tests.
#ifndef INFER_TESTS_TESTING_TENSORS_H_
#define INFER_TESTS_TESTING_TENSORS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "models/model.h"
#include "runtime/tensor.h"

namespace infer::testing {

// An INT64 tensor of shape [1] holding `value`.
inline Tensor Int64Scalar(std::string name, int64_t value) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = DataType::kInt64;
  t.shape = {1};
  t.data.assign(reinterpret_cast<const char*>(&value), sizeof(int64_t));
  return t;
}

// For test models' ModelBatch::Finish: answers request i with an INT64
// scalar output `name` holding values[i].
inline absl::Status AnswerInt64Scalars(const std::string& name, const std::vector<int64_t>& values,
                                       absl::Span<InferResponse* const> responses) {
  for (size_t i = 0; i < responses.size(); ++i) {
    responses[i]->outputs.push_back(Int64Scalar(name, values[i]));
  }
  return absl::OkStatus();
}

// The BYTES tensor "text" of shape [n] holding `sentences` (the 4-byte
// length layout of KServe's raw contents).
inline Tensor TextTensor(const std::vector<std::string>& sentences) {
  Tensor t;
  t.name = "text";
  t.dtype = DataType::kBytes;
  t.shape = {static_cast<int64_t>(sentences.size())};
  for (const std::string& s : sentences) AppendBytesElement(s, &t.data);
  return t;
}

// An INT64 tensor of shape [rows, values.size() / rows] holding `values`.
inline Tensor Int64Matrix(std::string name, const std::vector<int64_t>& values, int64_t rows) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = DataType::kInt64;
  t.shape = {rows, static_cast<int64_t>(values.size()) / rows};
  t.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t));
  return t;
}

// A request for `model` with one input, `input_ids`: INT64 [rows, length],
// every id `value`.
inline InferRequest IdsRequest(std::string model, int64_t rows, int64_t length, int64_t value = 0) {
  InferRequest r;
  r.model_name = std::move(model);
  r.inputs.push_back(Int64Matrix(
      "input_ids", std::vector<int64_t>(static_cast<size_t>(rows * length), value), rows));
  return r;
}

// The response's output named `name`, or nullptr.
inline const Tensor* FindOutput(const InferResponse& r, const std::string& name) {
  for (const Tensor& t : r.outputs) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace infer::testing

#endif  // INFER_TESTS_TESTING_TENSORS_H_
