// Model repository: one folder per model, each with a `config.pbtxt` in
// protobuf text format (message infer.config.ModelConfig, see
// protos/model_config.proto), or a Hugging Face / sentence-transformers
// folder as it is (config.json, model.safetensors, tokenizer.json; served by
// the "transformer" backend, which reads the family, tokenizer, pooling and
// length from the files, with the defaults below), e.g.
//
//   model_repository/
//     embed_pool/
//       config.pbtxt:   backend: "embed_pool"
//                       max_batch_size: 32
//                       dynamic_batching { max_queue_delay_microseconds: 2000 }
//
// Thread-compatible (plain functions).
#ifndef INFER_SERVER_KSERVE_MODEL_REPOSITORY_H_
#define INFER_SERVER_KSERVE_MODEL_REPOSITORY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "batching/batch_queue.h"
#include "engine/engine.h"
#include "model_config.pb.h"
#include "models/registry.h"

namespace infer {

// Defaults applied where a config leaves a field unset (0).
inline constexpr int kDefaultMaxBatchSize = 32;
inline constexpr int kDefaultMaxQueueDelayUs = 1000;
inline constexpr int kDefaultMaxQueueSize = 1024;

// Parses one config file. INVALID_ARGUMENT naming the file, line and field
// for syntax errors and bad values.
absl::StatusOr<config::ModelConfig> ParseModelConfig(const std::string& path,
                                                     const std::string& text);

// The batching policy a config asks for, with defaults filled in.
QueueOptions BatchingFromConfig(const config::ModelConfig& config);

// The CUDA-graph options a config asks for (optimization.cuda); what it
// leaves unset is left to the model's family.
CudaGraphsConfig GraphsFromConfig(const config::ModelConfig& config);

// The request limits a config asks for, with defaults filled in.
RequestLimits LimitsFromConfig(const config::ModelConfig& config);

// One model folder, loaded but not yet served: the model (created on
// `context`) and the batching policy and request limits its config asks for.
struct LoadedModel {
  std::string name;    // the folder's name, or the name it was given
  std::string source;  // its config.pbtxt, or its folder when it has none
  std::unique_ptr<Model> model;
  QueueOptions batching;
  RequestLimits limits;
};
// The backend a Hugging Face folder without a config.pbtxt is served by.
inline constexpr char kHuggingFaceBackend[] = "transformer";

// What infer-server's options give the models whose own files leave a
// choice open.
struct ServingDefaults {
  // The precision of a config that names none, and of a folder without a
  // config (infer-server --precision); a backend that computes in one
  // precision only keeps its own then.
  Precision precision = Precision::kAuto;
  // Parameters of each Hugging Face folder served without a config.pbtxt
  // (infer-server --pooling, --auto-truncate, --default-prompt-name, as
  // TEI's options of those names; infer-server always sets auto_truncate,
  // true unless --auto-truncate=false): kHuggingFaceBackend's parameters,
  // checked as a config's would be. A config.pbtxt sets its own parameters
  // instead.
  ModelParams folder_params;
  // Batching and limits of those folders (infer-server's TEI options
  // --max-batch-tokens, --max-batch-requests, --max-concurrent-requests,
  // --max-client-batch-size); 0: the defaults a config.pbtxt without them
  // gets.
  uint64_t max_batch_tokens = 0;       // dynamic_batching.max_batch_tokens
  uint32_t max_batch_size = 0;         // max_batch_size
  uint32_t max_queue_size = 0;         // default_queue_policy.max_queue_size
  uint64_t max_client_batch_size = 0;  // request_limits.max_client_batch_size
};

// Reads `dir`/config.pbtxt (or, when the folder has none but has a
// config.json, uses the defaults with kHuggingFaceBackend and
// `defaults.folder_params`) and creates its model as `name` (empty: the
// folder's name), checking the config against the model and `device`.
// Errors name the config file (or the folder) and the problem; NOT_FOUND
// when the folder has neither file.
absl::StatusOr<LoadedModel> LoadModelFolder(const std::string& dir, const DeviceContext& context,
                                            const DeviceInfo& device, const std::string& name = "",
                                            const ServingDefaults& defaults = {});

// Loads every model folder under `dir` into `engine` (LoadModelFolder, then
// Engine::AddModel); returns the names loaded. Fails on the first bad folder, naming the file and
// the problem.
absl::StatusOr<std::vector<std::string>> LoadModelRepository(const std::string& dir, Engine* engine,
                                                             const ServingDefaults& defaults = {});

// Loads the folders infer-server's --model options name ("DIR" or
// "NAME=DIR" each) into `engine`, in order; returns the names loaded. Fails
// on the first bad one, naming it and the problem.
absl::StatusOr<std::vector<std::string>> LoadModelFolders(const std::vector<std::string>& specs,
                                                          Engine* engine,
                                                          const ServingDefaults& defaults = {});

}  // namespace infer

#endif  // INFER_SERVER_KSERVE_MODEL_REPOSITORY_H_
