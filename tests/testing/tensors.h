// Small tensor builders for tests.
#ifndef INFER_TESTS_TESTING_TENSORS_H_
#define INFER_TESTS_TESTING_TENSORS_H_

#include <cstdint>
#include <string>
#include <utility>

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

}  // namespace infer::testing

#endif  // INFER_TESTS_TESTING_TENSORS_H_
