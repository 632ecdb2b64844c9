#include "server/kserve/model_repository.h"

#include <filesystem>
#include <fstream>

#include "models/bert/bert_gen.h"
#include "models/transformer/encoder_cpu.h"
#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;
namespace fs = std::filesystem;

class RepositoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("infer_repo_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& model, const std::string& text) {
    fs::create_directories(dir_ / model);
    std::ofstream(dir_ / model / "config.pbtxt") << text;
  }
  fs::path dir_;
};

TEST_F(RepositoryTest, LoadsModelsWithTheirBatchingPolicy) {
  Write("small", R"(
    backend: "embed_pool"
    max_batch_size: 8
    dynamic_batching { max_queue_delay_microseconds: 2500
                       default_queue_policy { max_queue_size: 3 } }
    parameters { key: "vocab_size" value { string_value: "100" } }
    parameters { key: "embedding_size" value { string_value: "16" } }
  )");
  Write("defaults", R"(backend: "embed_pool")");
  auto engine = Engine::Create({.device = "cpu"});
  auto loaded = LoadModelRepository(dir_.string(), engine->get());
  ASSERT_THAT(loaded, IsOk());
  EXPECT_EQ(*loaded, (std::vector<std::string>{"defaults", "small"}));
  const QueueOptions q = *(*engine)->GetBatchingOptions("small");
  EXPECT_EQ(q.max_batch_size, 8);
  EXPECT_EQ(q.max_queue_delay, absl::Microseconds(2500));
  EXPECT_EQ(q.max_queue_size, 3);
  EXPECT_EQ((*(*engine)->GetModelSpec("small"))->outputs[0].shape, (std::vector<int64_t>{-1, 16}));
  const QueueOptions d = *(*engine)->GetBatchingOptions("defaults");
  EXPECT_EQ(d.max_batch_size, kDefaultMaxBatchSize);
  EXPECT_EQ(d.max_queue_delay, absl::Microseconds(kDefaultMaxQueueDelayUs));
  EXPECT_EQ(d.max_queue_size, kDefaultMaxQueueSize);
}

// A Hugging Face checkpoint folder with a config.pbtxt is served, and the bert
// parameters reach the model: CLS pooling without normalisation gives the
// [CLS] state as it is, which the default (mean, normalised) does not.
TEST_F(RepositoryTest, BertCheckpointFolderIsServedWithItsParameters) {
  BertGenOptions gen;
  gen.config = *BertPreset("tiny");
  ASSERT_THAT(GenerateBertCheckpoint((dir_ / "cls").string(), gen), IsOk());
  ASSERT_THAT(GenerateBertCheckpoint((dir_ / "mean").string(), gen), IsOk());
  Write("cls", R"(
    backend: "bert"
    precision: "fp32"
    parameters { key: "pooling" value { string_value: "cls" } }
    parameters { key: "normalize" value { string_value: "false" } }
  )");
  Write("mean", R"(backend: "bert" precision: "fp32")");
  auto engine = Engine::Create({.device = "cpu"});
  ASSERT_THAT(LoadModelRepository(dir_.string(), engine->get()), IsOk());
  const int64_t ids[] = {2, 40, 41, 3};
  auto embed = [&](const std::string& model) {
    InferRequest r;
    r.model_name = model;
    Tensor t;
    t.name = "input_ids";
    t.dtype = DataType::kInt64;
    t.shape = {1, 4};
    t.data.assign(reinterpret_cast<const char*>(ids), sizeof(ids));
    r.inputs.push_back(t);
    auto out = (*engine)->Infer(std::move(r));
    EXPECT_THAT(out, IsOk());
    const Tensor& e = out->outputs.at(0);
    return std::vector<float>(e.as<float>(), e.as<float>() + e.shape[1]);
  };
  auto reference = TransformerEncoderCpu::Load((dir_ / "cls").string());
  ASSERT_THAT(reference, IsOk());
  for (const bool cls : {true, false}) {
    auto want = (*reference)
                    ->Encode(ids, {1, 1, 1, 1}, 1, 4, /*normalize=*/!cls,
                             cls ? Pooling::kCls : Pooling::kMean);
    ASSERT_THAT(want, IsOk());
    const std::vector<float> got = embed(cls ? "cls" : "mean");
    ASSERT_EQ(got.size(), want->size());
    for (size_t d = 0; d < got.size(); ++d) EXPECT_NEAR(got[d], (*want)[d], 1e-6) << d;
  }

  Write("cls", R"(
    backend: "bert"
    parameters { key: "pooling" value { string_value: "max" } }
  )");
  auto other = Engine::Create({.device = "cpu"});
  EXPECT_THAT(LoadModelRepository(dir_.string(), other->get()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "parameter 'pooling' = 'max' is not mean, cls, last_token or splade"));
}

TEST_F(RepositoryTest, BatchInvariantIsAParameterOfTheBertBackend) {
  BertGenOptions gen;
  gen.config = *BertPreset("tiny");
  ASSERT_THAT(GenerateBertCheckpoint((dir_ / "inv").string(), gen), IsOk());
  Write("inv", R"(
    backend: "bert"
    parameters { key: "batch_invariant" value { string_value: "true" } }
  )");
  auto engine = Engine::Create({.device = "cpu"});
  ASSERT_THAT(LoadModelRepository(dir_.string(), engine->get()), IsOk());
  auto spec = (*engine)->GetModelSpec("inv");
  ASSERT_THAT(spec, IsOk());
  EXPECT_TRUE((*spec)->batch_invariant);
  EXPECT_NE((*spec)->implementation.find("batch-invariant"), std::string::npos);
  Write("inv", R"(
    backend: "bert"
    parameters { key: "batch_invariant" value { string_value: "yes" } }
  )");
  auto other = Engine::Create({.device = "cpu"});
  EXPECT_THAT(LoadModelRepository(dir_.string(), other->get()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "parameter 'batch_invariant' = 'yes' is not true or false"));
}

// A CUDA option: a CPU server loads the model without it (as it does CUDA
// Graphs' fields), and a value that is not a boolean is refused anywhere.
TEST_F(RepositoryTest, CudaFusedEpiloguesIsABertParameterTheCpuIgnores) {
  BertGenOptions gen;
  gen.config = *BertPreset("tiny");
  ASSERT_THAT(GenerateBertCheckpoint((dir_ / "lt").string(), gen), IsOk());
  Write("lt", R"(
    backend: "bert"
    parameters { key: "cuda_fused_epilogues" value { string_value: "true" } }
  )");
  auto engine = Engine::Create({.device = "cpu"});
  ASSERT_THAT(LoadModelRepository(dir_.string(), engine->get()), IsOk());
  auto spec = (*engine)->GetModelSpec("lt");
  ASSERT_THAT(spec, IsOk());
  EXPECT_EQ((*spec)->implementation.find("cuBLASLt"), std::string::npos);
  Write("lt", R"(
    backend: "bert"
    parameters { key: "cuda_fused_epilogues" value { string_value: "on" } }
  )");
  auto other = Engine::Create({.device = "cpu"});
  EXPECT_THAT(LoadModelRepository(dir_.string(), other->get()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "parameter 'cuda_fused_epilogues' = 'on' is not true or false"));
}

TEST_F(RepositoryTest, BatchingPolicyFields) {
  Write("m", R"(
    backend: "embed_pool"
    max_batch_size: 16
    dynamic_batching {
      max_queue_delay_microseconds: 500
      priority_levels: 3
      default_priority_level: 2
      default_queue_policy { max_queue_size: 64 default_timeout_microseconds: 250000 }
      length_buckets: [16, 64, 256]
      max_batch_tokens: 4096
      priority_aging_microseconds: 20000
    }
  )");
  auto engine = Engine::Create({.device = "cpu"});
  ASSERT_THAT(LoadModelRepository(dir_.string(), engine->get()), IsOk());
  const QueueOptions q = *(*engine)->GetBatchingOptions("m");
  EXPECT_EQ(q.length_buckets, (std::vector<int64_t>{16, 64, 256}));
  EXPECT_EQ(q.max_batch_tokens, 4096);
  EXPECT_EQ(q.priority_levels, 3);
  EXPECT_EQ(q.default_priority_level, 2);
  EXPECT_EQ(q.default_timeout, absl::Milliseconds(250));
  EXPECT_EQ(q.priority_aging, absl::Milliseconds(20));
  EXPECT_EQ(q.max_queue_size, 64);
}

TEST_F(RepositoryTest, RequestLimitsFieldsAndDefaults) {
  Write("m", R"(
    backend: "embed_pool"
    request_limits { max_client_batch_size: 8 max_input_length: 128 max_request_tokens: 512
                     max_tensor_elements: 4096 max_text_bytes: 1000 }
  )");
  Write("d", R"(backend: "embed_pool")");
  auto engine = Engine::Create({.device = "cpu"});
  ASSERT_THAT(LoadModelRepository(dir_.string(), engine->get()), IsOk());
  const RequestLimits m = *(*engine)->GetRequestLimits("m");
  EXPECT_EQ(m.max_client_batch_size, 8);
  EXPECT_EQ(m.max_input_length, 128);
  EXPECT_EQ(m.max_request_tokens, 512);
  EXPECT_EQ(m.max_tensor_elements, 4096);
  EXPECT_EQ(m.max_text_bytes, 1000);
  const RequestLimits d = *(*engine)->GetRequestLimits("d");
  const RequestLimits defaults;
  EXPECT_EQ(d.max_client_batch_size, defaults.max_client_batch_size);
  EXPECT_EQ(d.max_request_tokens, defaults.max_request_tokens);
  EXPECT_EQ(d.max_text_bytes, defaults.max_text_bytes);
  fs::remove_all(dir_);
  Write("big", "backend: \"embed_pool\"\nrequest_limits { max_text_bytes: 2000000000000 }\n");
  auto other = Engine::Create({.device = "cpu"});
  EXPECT_THAT(LoadModelRepository(dir_.string(), other->get()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "big/config.pbtxt: field 'request_limits.max_text_bytes' = 2000000000000 "
                       "is too large"));
}

// optimization.cuda, Triton's field for CUDA Graphs: unset leaves the
// family's defaults, and the server's own graph_max_tokens is bounded.
TEST_F(RepositoryTest, CudaGraphFieldsAndDefaults) {
  auto parse = [](const std::string& text) { return ParseModelConfig("m/config.pbtxt", text); };
  auto unset = parse(R"(backend: "bert")");
  ASSERT_THAT(unset, IsOk());
  EXPECT_FALSE(GraphsFromConfig(*unset).enabled.has_value());
  EXPECT_EQ(GraphsFromConfig(*unset).max_tokens, 0);
  auto off = parse(R"(backend: "bert" optimization { cuda { graphs: false } })");
  ASSERT_THAT(off, IsOk());
  EXPECT_EQ(GraphsFromConfig(*off).enabled, false);
  auto sized =
      parse(R"(backend: "bert" optimization { cuda { graphs: true graph_max_tokens: 512 } })");
  ASSERT_THAT(sized, IsOk());
  EXPECT_EQ(GraphsFromConfig(*sized).enabled, true);
  EXPECT_EQ(GraphsFromConfig(*sized).max_tokens, 512);
  EXPECT_THAT(parse(R"(backend: "bert" optimization { cuda { graph_max_tokens: 2000000 } })"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "field 'optimization.cuda.graph_max_tokens' = 2000000 is too large"));
}

TEST_F(RepositoryTest, BadBatchingPolicyIsNamed) {
  Write("m", "backend: \"embed_pool\"\ndynamic_batching { length_buckets: [64, 16] }\n");
  auto engine = Engine::Create({.device = "cpu"});
  EXPECT_THAT(LoadModelRepository(dir_.string(), engine->get()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "m/config.pbtxt: field 'dynamic_batching.length_buckets' = 16 breaks the "
                       "rule: buckets are positive and ascending"));
  fs::remove_all(dir_ / "m");
  Write("n",
        "backend: \"embed_pool\"\ndynamic_batching { priority_levels: 2 "
        "default_priority_level: 3 }\n");
  EXPECT_THAT(LoadModelRepository(dir_.string(), engine->get()),
              StatusIs(absl::StatusCode::kInvalidArgument, "default_priority_level' = 3"));
}

TEST_F(RepositoryTest, DefaultPriorityLevelWithOneLevel) {
  // priority_levels unset means one level: level 1 is valid, 2 is not.
  Write("one", "backend: \"embed_pool\"\ndynamic_batching { default_priority_level: 1 }\n");
  auto engine = Engine::Create({.device = "cpu"});
  EXPECT_THAT(LoadModelRepository(dir_.string(), engine->get()), IsOk());
  fs::remove_all(dir_ / "one");
  Write("two", "backend: \"embed_pool\"\ndynamic_batching { default_priority_level: 2 }\n");
  auto other = Engine::Create({.device = "cpu"});
  EXPECT_THAT(LoadModelRepository(dir_.string(), other->get()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "two/config.pbtxt: field 'dynamic_batching.default_priority_level' = 2 "
                       "must be within priority_levels (1)"));
}

TEST_F(RepositoryTest, AnEngineRefusalNamesTheConfigFile) {
  Write("m", "backend: \"embed_pool\"\n");
  auto engine = Engine::Create({.device = "cpu"});
  ASSERT_THAT(LoadModelRepository(dir_.string(), engine->get()), IsOk());
  EXPECT_THAT(
      LoadModelRepository(dir_.string(), engine->get()),
      StatusIs(absl::StatusCode::kAlreadyExists, "m/config.pbtxt: model 'm' is already loaded"));
}

TEST_F(RepositoryTest, TritonInterfaceFieldsAreCheckedAgainstTheBackend) {
  // A config as written for Triton: platform, input, output, instance_group.
  const std::string triton_style = R"(
    backend: "embed_pool"
    platform: "infer_embed_pool"
    max_batch_size: 8
    input [ { name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] } ]
    output [ { name: "embedding" data_type: TYPE_FP32 dims: [ 384 ] } ]
    instance_group [ { count: 1 kind: KIND_CPU } ]
  )";
  Write("m", triton_style);
  auto engine = Engine::Create({.device = "cpu"});
  EXPECT_THAT(LoadModelRepository(dir_.string(), engine->get()), IsOk());
  {
    // Token ids declared INT32, as Triton configs often do: taken (widened).
    std::string int32 = triton_style;
    int32.replace(int32.find("TYPE_INT64"), 10, "TYPE_INT32");
    fs::remove_all(dir_ / "m");
    Write("m", int32);
    auto fresh = Engine::Create({.device = "cpu"});
    EXPECT_THAT(LoadModelRepository(dir_.string(), fresh->get()), IsOk());
  }
  fs::remove_all(dir_ / "m");
  Write("m", triton_style);
  struct Case {
    std::string from, to, error;
  };
  const std::vector<Case> cases = {
      {"TYPE_INT64", "TYPE_INT16",
       "m/config.pbtxt: field 'input' 'input_ids' has data_type TYPE_INT16; the backend serves it "
       "as TYPE_INT64"},
      {"dims: [ 384 ]", "dims: [ 256 ]",
       "field 'output' 'embedding' has dims [256]; the backend serves it with dims [384]"},
      {"name: \"input_ids\"", "name: \"tokens\"",
       "field 'input' names 'tokens', which the backend does not have (it has input_ids)"},
      {"platform: \"infer_embed_pool\"", "platform: \"onnxruntime_onnx\"",
       "field 'platform' = 'onnxruntime_onnx': this model is served by the built-in backend "
       "'embed_pool'"},
      {"kind: KIND_CPU", "kind: KIND_GPU",
       "field 'instance_group' asks for KIND_GPU but this server runs on the CPU"},
      {"count: 1", "count: 2", "field 'instance_group.count' = 2: one instance per device"},
  };
  for (const Case& c : cases) {
    std::string config = triton_style;
    config.replace(config.find(c.from), c.from.size(), c.to);
    fs::remove_all(dir_ / "m");
    Write("m", config);
    auto fresh = Engine::Create({.device = "cpu"});
    EXPECT_THAT(LoadModelRepository(dir_.string(), fresh->get()),
                StatusIs(absl::StatusCode::kInvalidArgument, c.error))
        << c.to;
  }
}

// `precision` reaches the model and shows in its spec; a value that is no
// precision, or one the backend or device cannot compute, stops loading
// naming the file and the value.
TEST_F(RepositoryTest, PrecisionIsAppliedOrRefusedByName) {
  BertGenOptions gen;
  gen.config = *BertPreset("tiny");
  ASSERT_THAT(GenerateBertCheckpoint((dir_ / "enc").string(), gen), IsOk());
  Write("enc", R"(backend: "bert" precision: "fp32")");
  Write("pool", R"(backend: "embed_pool" precision: "auto")");
  auto engine = Engine::Create({.device = "cpu"});
  ASSERT_THAT(LoadModelRepository(dir_.string(), engine->get()), IsOk());
  EXPECT_EQ((**(*engine)->GetModelSpec("enc")).precision, "fp32");
  EXPECT_EQ((**(*engine)->GetModelSpec("pool")).precision, "fp32");
  const struct {
    std::string folder, config;
    absl::StatusCode code;
    std::string error;
  } cases[] = {
      {"enc", R"(backend: "bert" precision: "fp4")", absl::StatusCode::kInvalidArgument,
       "enc/config.pbtxt: field 'precision': precision 'fp4' is not one of auto, fp32, bf16, "
       "fp16, int8, fp8"},
      {"enc", R"(backend: "bert" precision: "fp8")", absl::StatusCode::kFailedPrecondition,
       "enc/config.pbtxt: precision fp8: the CPU encoder computes fp32, bf16 or int8"},
      {"enc", R"(backend: "bert" precision: "fp16")", absl::StatusCode::kFailedPrecondition,
       "enc/config.pbtxt: precision fp16: the CPU encoder computes fp32, bf16 or int8"},
      {"pool", R"(backend: "embed_pool" precision: "bf16")", absl::StatusCode::kInvalidArgument,
       "pool/config.pbtxt: precision 'bf16': backend 'embed_pool' computes fp32 only"},
  };
  for (const auto& c : cases) {
    fs::remove_all(dir_ / (c.folder == "enc" ? "pool" : "enc"));
    Write(c.folder, c.config);
    auto fresh = Engine::Create({.device = "cpu"});
    EXPECT_THAT(LoadModelRepository(dir_.string(), fresh->get()), StatusIs(c.code, c.error))
        << c.config;
  }
  // INT8 only when asked for, and then in the spec.
  fs::remove_all(dir_ / "pool");
  ASSERT_THAT(GenerateBertCheckpoint((dir_ / "enc").string(), gen), IsOk());
  Write("enc", R"(backend: "bert" precision: "int8")");
  auto int8 = Engine::Create({.device = "cpu"});
  ASSERT_THAT(LoadModelRepository(dir_.string(), int8->get()), IsOk());
  EXPECT_EQ((**(*int8)->GetModelSpec("enc")).precision, "int8");
}

TEST_F(RepositoryTest, SyntaxErrorNamesFileAndLine) {
  Write("bad", "backend: \"embed_pool\"\nmax_batch_size: eight\n");
  auto engine = Engine::Create({.device = "cpu"});
  EXPECT_THAT(LoadModelRepository(dir_.string(), engine->get()),
              StatusIs(absl::StatusCode::kInvalidArgument, "bad/config.pbtxt: line 2"));
}

TEST_F(RepositoryTest, UnknownFieldBackendAndParameterAreNamed) {
  Write("a", "backend: \"embed_pool\"\nmax_batch: 4\n");
  auto engine = Engine::Create({.device = "cpu"});
  EXPECT_THAT(LoadModelRepository(dir_.string(), engine->get()),
              StatusIs(absl::StatusCode::kInvalidArgument, "max_batch"));
  fs::remove_all(dir_ / "a");
  Write("b", "backend: \"onnx\"\n");
  EXPECT_THAT(
      LoadModelRepository(dir_.string(), engine->get()),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          "b/config.pbtxt: unknown backend 'onnx'; built-in backends: bert, embed_pool, identity"));
  fs::remove_all(dir_ / "b");
  Write("c", R"(backend: "embed_pool"
               parameters { key: "hidden" value { string_value: "3" } })");
  EXPECT_THAT(LoadModelRepository(dir_.string(), engine->get()),
              StatusIs(absl::StatusCode::kInvalidArgument, "unknown parameter 'hidden'"));
  fs::remove_all(dir_ / "c");
  Write("d", R"(backend: "embed_pool"
               parameters { key: "seed" value { string_value: "x1" } })");
  EXPECT_THAT(
      LoadModelRepository(dir_.string(), engine->get()),
      StatusIs(absl::StatusCode::kInvalidArgument, "parameter 'seed' = 'x1' is not an integer"));
}

TEST_F(RepositoryTest, MissingConfigBackendOrMismatchedName) {
  fs::create_directories(dir_ / "empty");
  auto engine = Engine::Create({.device = "cpu"});
  EXPECT_THAT(LoadModelRepository(dir_.string(), engine->get()),
              StatusIs(absl::StatusCode::kNotFound,
                       "empty: no config.pbtxt (a model's config) and no config.json"));
  fs::remove_all(dir_ / "empty");
  Write("nobackend", "max_batch_size: 4\n");
  EXPECT_THAT(LoadModelRepository(dir_.string(), engine->get()),
              StatusIs(absl::StatusCode::kInvalidArgument, "field 'backend' is required"));
  fs::remove_all(dir_ / "nobackend");
  Write("x", "name: \"y\"\nbackend: \"embed_pool\"\n");
  EXPECT_THAT(LoadModelRepository(dir_.string(), engine->get()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "field 'name' = 'y' differs from the folder name 'x'"));
  EXPECT_THAT(LoadModelRepository((dir_ / "none").string(), engine->get()),
              StatusIs(absl::StatusCode::kNotFound, "is not a directory"));
}

// infer-server --precision: the default for configs that name none and for
// folders without a config; a config's own precision wins, and a backend
// that computes one precision only keeps it rather than refusing.
TEST_F(RepositoryTest, ServerDefaultPrecisionAppliesWhereTheConfigNamesNone) {
  BertGenOptions gen;
  gen.config = *BertPreset("tiny");
  ASSERT_THAT(GenerateBertCheckpoint((dir_ / "enc").string(), gen), IsOk());
  ASSERT_THAT(GenerateBertCheckpoint((dir_ / "named").string(), gen), IsOk());
  Write("enc", R"(backend: "bert")");
  Write("named", R"(backend: "bert" precision: "fp32")");
  Write("pool", R"(backend: "embed_pool")");
  fs::copy(fs::path(INFER_SOURCE_DIR) / "tests/fixtures/families/qwen3", dir_ / "qwen",
           fs::copy_options::recursive);
  auto engine = Engine::Create({.device = "cpu"});
  ASSERT_THAT(LoadModelRepository(dir_.string(), engine->get(), {Precision::kInt8}), IsOk());
  EXPECT_EQ((**(*engine)->GetModelSpec("enc")).precision, "int8");
  EXPECT_EQ((**(*engine)->GetModelSpec("named")).precision, "fp32");
  EXPECT_EQ((**(*engine)->GetModelSpec("pool")).precision, "fp32");
  EXPECT_EQ((**(*engine)->GetModelSpec("qwen")).precision, "int8");
  ASSERT_THAT(
      LoadModelFolders({"q2=" + (dir_ / "qwen").string()}, engine->get(), {Precision::kFp32}),
      IsOk());
  EXPECT_EQ((**(*engine)->GetModelSpec("q2")).precision, "fp32");
  // A default the device cannot compute is refused for the model it reaches.
  auto other = Engine::Create({.device = "cpu"});
  EXPECT_THAT(LoadModelFolders({(dir_ / "qwen").string()}, other->get(), {Precision::kFp16}),
              StatusIs(absl::StatusCode::kFailedPrecondition, "fp16"));
}

// A Hugging Face folder without a config.pbtxt is served by the transformer
// backend with the default batching policy; --model's NAME=DIR names it.
TEST_F(RepositoryTest, HuggingFaceFolderWithoutAConfigIsServed) {
  const fs::path fixture = fs::path(INFER_SOURCE_DIR) / "tests/fixtures/families/qwen3";
  fs::copy(fixture, dir_ / "qwen", fs::copy_options::recursive);
  auto engine = Engine::Create({.device = "cpu"});
  auto loaded = LoadModelRepository(dir_.string(), engine->get());
  ASSERT_THAT(loaded, IsOk());
  EXPECT_EQ(*loaded, (std::vector<std::string>{"qwen"}));
  const ModelSpec& spec = **(*engine)->GetModelSpec("qwen");
  EXPECT_EQ(spec.backend, "transformer");
  EXPECT_NE(spec.description.find("qwen3: 2 layers"), std::string::npos) << spec.description;
  EXPECT_NE(spec.description.find("last_token pooling"), std::string::npos) << spec.description;
  EXPECT_EQ((*(*engine)->GetBatchingOptions("qwen")).max_batch_size, kDefaultMaxBatchSize);

  auto named = LoadModelFolders({"embedder=" + (dir_ / "qwen").string() + "/"}, engine->get());
  ASSERT_THAT(named, IsOk());
  EXPECT_EQ(*named, (std::vector<std::string>{"embedder"}));
  EXPECT_THAT(LoadModelFolders({(dir_ / "qwen").string()}, engine->get()),
              StatusIs(absl::StatusCode::kAlreadyExists, "model 'qwen' is already loaded"));
  EXPECT_THAT(LoadModelFolders({"=x"}, engine->get()),
              StatusIs(absl::StatusCode::kInvalidArgument, "expected DIR or NAME=DIR"));
  // A config.pbtxt beside the files overrides what they say.
  Write("qwen",
        "backend: \"transformer\"\nparameters { key: \"pooling\" value { string_value: \"mean\" } "
        "}\n");
  auto engine2 = Engine::Create({.device = "cpu"});
  ASSERT_THAT(LoadModelRepository(dir_.string(), engine2->get()), IsOk());
  EXPECT_NE((**(*engine2)->GetModelSpec("qwen")).description.find("mean pooling"),
            std::string::npos);
}

// infer-server --pooling, --auto-truncate and --default-prompt-name: the
// parameters of a folder served without a config.pbtxt, checked as a
// config's are; a folder with a config.pbtxt keeps its own.
TEST_F(RepositoryTest, FolderParametersApplyToFoldersWithoutAConfig) {
  fs::copy(fs::path(INFER_SOURCE_DIR) / "tests/fixtures/sparse/bert-splade", dir_ / "splade",
           fs::copy_options::recursive);
  fs::remove(dir_ / "splade" / "modules.json");  // a plain transformers folder
  fs::copy(fs::path(INFER_SOURCE_DIR) / "tests/fixtures/families/qwen3", dir_ / "qwen",
           fs::copy_options::recursive);
  Write("qwen", R"(backend: "transformer")");
  auto plain = Engine::Create({.device = "cpu"});
  ASSERT_THAT(LoadModelRepository(dir_.string(), plain->get()), IsOk());
  EXPECT_EQ((**(*plain)->GetModelSpec("splade")).pooling, "mean");
  ServingDefaults defaults;
  defaults.folder_params = {{"pooling", "splade"}, {"auto_truncate", "true"}};
  auto engine = Engine::Create({.device = "cpu"});
  ASSERT_THAT(LoadModelRepository(dir_.string(), engine->get(), defaults), IsOk());
  const ModelSpec& spec = **(*engine)->GetModelSpec("splade");
  EXPECT_EQ(spec.pooling, "splade");
  EXPECT_EQ(spec.outputs[0].name, "sparse_counts");
  EXPECT_NE((**(*engine)->GetModelSpec("qwen")).pooling, "splade");  // its config's
  // auto_truncate (infer-server sets it for every such folder, true unless
  // --auto-truncate=false): the config.pbtxt, which names none, refuses.
  EXPECT_TRUE(spec.auto_truncate);
  EXPECT_FALSE((**(*engine)->GetModelSpec("qwen")).auto_truncate);
  EXPECT_FALSE((**(*plain)->GetModelSpec("splade")).auto_truncate);
  // A parameter the folder's model cannot take is refused, naming it.
  defaults.folder_params = {{"pooling", "splade"}};
  auto other = Engine::Create({.device = "cpu"});
  EXPECT_THAT(LoadModelFolders({"q=" + (dir_ / "qwen").string()}, other->get(), defaults), IsOk());
  fs::remove(dir_ / "qwen" / "config.pbtxt");
  EXPECT_THAT(LoadModelFolders({(dir_ / "qwen").string()}, other->get(), defaults),
              StatusIs(absl::StatusCode::kInvalidArgument, "masked-LM"));
  defaults.folder_params = {{"prompt_name", "nope"}};
  EXPECT_THAT(LoadModelFolders({(dir_ / "qwen").string()}, other->get(), defaults),
              StatusIs(absl::StatusCode::kInvalidArgument, "nope"));
}

}  // namespace
}  // namespace infer
