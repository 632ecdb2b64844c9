// What the served BERT model's tests share (bert_model_test.cc,
// bert_model_inputs_test.cc): synthetic checkpoints in a folder of the test
// process's own, the devices this machine has, and a served model that must
// load. Test-only.
#ifndef INFER_MODELS_BERT_BERT_MODEL_TEST_UTIL_H_
#define INFER_MODELS_BERT_BERT_MODEL_TEST_UTIL_H_

#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "models/bert/bert_gen.h"
#include "models/bert/bert_model.h"
#include "models/precision.h"
#include "tests/testing/served_bert.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace infer::bert_model_testing {

using ::infer::testing::IsOk;
using ::infer::testing::ServedBert;

inline Tensor Int64(const std::string& name, const std::vector<std::vector<int64_t>>& rows) {
  Tensor t;
  t.name = name;
  t.dtype = DataType::kInt64;
  t.shape = {static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())};
  for (const auto& r : rows) {
    t.data.append(reinterpret_cast<const char*>(r.data()), r.size() * sizeof(int64_t));
  }
  return t;
}

// A synthetic checkpoint in a folder of this test process's own (CTest runs
// test cases in parallel processes).
inline std::string Generated(const std::string& preset, BertConfig* shape = nullptr) {
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/bert_model_test_", getpid(), "_", preset);
  BertGenOptions o;
  if (preset == "mid") {  // big enough for 2 MiB blocks, small enough for CPU
    o.config = *BertPreset("tiny");
    o.config.hidden_size = 128;
    o.config.num_attention_heads = 4;
    o.config.intermediate_size = 512;
    o.config.max_position_embeddings = 512;
    o.config.vocab_size = 1000;
  } else {
    o.config = *BertPreset(preset);
  }
  if (shape != nullptr) *shape = o.config;
  EXPECT_THAT(GenerateBertCheckpoint(dir, o), IsOk());
  return ::infer::testing::RemoveAtExit(dir);
}

inline std::vector<std::string> Devices() {
  std::vector<std::string> specs = {"cpu"};
  if (ProbeCuda().device_count > 0) specs.push_back("cuda:0");
  return specs;
}

// FP32 on the CPU (FP16 on a GPU): what the exact comparisons below need.
inline Precision Exact(const std::string& device) {
  return device == "cpu" ? Precision::kFp32 : Precision::kAuto;
}

inline BertModelOptions ServedOptions(const std::string& spec, const std::string& dir,
                                      Precision precision, bool auto_truncate) {
  BertModelOptions o;
  o.checkpoint_dir = dir;
  o.auto_truncate = auto_truncate;
  o.precision = precision == Precision::kAuto ? Exact(spec) : precision;
  // These checkpoints are random (no quality to keep); the gate has its
  // own tests (PrecisionIsResolvedAtLoad, precision_gate_test).
  o.precision_gate = false;
  return o;
}

// The folder `dir` served on `spec`; it must load.
class Served : public ServedBert {
 public:
  Served(const std::string& spec, const std::string& dir, Precision precision = Precision::kAuto,
         bool auto_truncate = false)
      : ServedBert(spec, ServedOptions(spec, dir, precision, auto_truncate)) {
    EXPECT_THAT(status(), IsOk());
  }
};

}  // namespace infer::bert_model_testing

#endif  // INFER_MODELS_BERT_BERT_MODEL_TEST_UTIL_H_
