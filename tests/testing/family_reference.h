// The family fixtures' references (tests/fixtures/families/FAMILY, made by
// models/tools/make_family_fixtures.py with transformers' own classes): the
// inputs (ids, token types), the pooling, and transformers' last hidden
// states and pooled, normalised embedding of each input. Header-only, for the
// CPU and CUDA encoders' family tests. Failures to read are gtest failures.
#ifndef INFER_TESTS_TESTING_FAMILY_REFERENCE_H_
#define INFER_TESTS_TESTING_FAMILY_REFERENCE_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/checkpoint.h"
#include "models/transformer/encoder.h"
#include "tests/testing/reference_data.h"
#include "tests/testing/status_matchers.h"

namespace infer::testing {

struct Reference {
  std::string dir;
  Pooling pooling = Pooling::kMean;
  std::vector<std::vector<int64_t>> ids;
  std::vector<std::vector<int64_t>> types;  // per input; empty: all type 0
  std::vector<std::vector<float>> hidden, embedding;
};

// `family`: a folder of tests/fixtures/families, or SET/FAMILY for another
// set (families-cuda/qwen3: heads of 32, for the CUDA encoder).
inline Reference ReadReference(const std::string& family) {
  Reference r;
  r.dir = FixturePath(family.find('/') == std::string::npos ? "families/" + family : family);
  auto text = ReadCheckpointFile(r.dir + "/reference.json");
  EXPECT_THAT(text, IsOk());
  const nlohmann::json j = nlohmann::json::parse(*text);
  const std::string pooling = j["pooling"];
  r.pooling = pooling == "cls"         ? Pooling::kCls
              : pooling == "lasttoken" ? Pooling::kLastToken
                                       : Pooling::kMean;
  auto tensors = ReadSafetensors(r.dir + "/reference.safetensors");
  EXPECT_THAT(tensors, IsOk());
  for (size_t i = 0; i < j["inputs"].size(); ++i) {
    r.ids.push_back(j["inputs"][i]["ids"].get<std::vector<int64_t>>());
    r.types.push_back(j["inputs"][i].value("types", std::vector<int64_t>()));
    r.hidden.push_back((*tensors)["hidden_" + std::to_string(i)].values);
    r.embedding.push_back((*tensors)["embedding_" + std::to_string(i)].values);
  }
  return r;
}

// A parameterised test's name for a fixture path: its last component
// without dashes ("families-cuda/xlm-roberta" -> "xlmroberta").
inline std::string FamilyTestName(const ::testing::TestParamInfo<const char*>& info) {
  std::string name = info.param;
  name = name.substr(name.rfind('/') + 1);
  name.erase(std::remove(name.begin(), name.end(), '-'), name.end());
  return name;
}

}  // namespace infer::testing

#endif  // INFER_TESTS_TESTING_FAMILY_REFERENCE_H_
