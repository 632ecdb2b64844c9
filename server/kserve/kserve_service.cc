#include "server/kserve/kserve_service.h"

#include <vector>

#include "runtime/build_config.h"
#include "server/kserve/proto_codec.h"
#include "server/kserve/proto_request.h"

namespace infer {
namespace {

void FillTensorMetadata(const TensorSpec& spec,
                        inference::ModelMetadataResponse::TensorMetadata* out) {
  out->set_name(spec.name);
  out->set_datatype(std::string(DataTypeName(spec.dtype)));
  for (int64_t d : spec.shape) out->add_shape(d);
}

void FillDuration(const DurationStat& d, inference::StatisticDuration* out) {
  out->set_count(d.count);
  out->set_ns(d.ns);
}

}  // namespace

void FillServerMetadata(inference::ServerMetadataResponse* response) {
  response->set_name("infer");
  response->set_version(INFER_VERSION);
  response->add_extensions("model_configuration");
  response->add_extensions("statistics");
  response->add_extensions("binary_tensor_data");
}

absl::Status FillModelMetadata(const Engine& engine, const std::string& model,
                               const std::string& version,
                               inference::ModelMetadataResponse* response) {
  absl::StatusOr<const ModelSpec*> spec = engine.GetModelSpec(model);
  if (!spec.ok()) return spec.status();
  if (absl::Status s = CheckVersion(model, version); !s.ok()) return s;
  response->set_name((*spec)->name);
  response->add_versions(kModelVersion);
  response->set_platform((*spec)->platform);
  for (const TensorSpec& t : (*spec)->inputs) FillTensorMetadata(t, response->add_inputs());
  for (const TensorSpec& t : (*spec)->outputs) FillTensorMetadata(t, response->add_outputs());
  return absl::OkStatus();
}

absl::Status FillModelConfig(const Engine& engine, const std::string& model,
                             const std::string& version, inference::ModelConfigResponse* response) {
  absl::StatusOr<const ModelSpec*> spec = engine.GetModelSpec(model);
  if (!spec.ok()) return spec.status();
  if (absl::Status s = CheckVersion(model, version); !s.ok()) return s;
  absl::StatusOr<QueueOptions> queue = engine.GetBatchingOptions(model);
  if (!queue.ok()) return queue.status();
  ModelConfigToProto(**spec, *queue, engine.device()->info(), response->mutable_config());
  return absl::OkStatus();
}

absl::Status FillModelStatistics(const Engine& engine, const std::string& model,
                                 const std::string& version,
                                 inference::ModelStatisticsResponse* response) {
  std::vector<std::string> names;
  if (model.empty()) {
    names = engine.ModelNames();
  } else {
    names.push_back(model);
  }
  for (const std::string& name : names) {
    absl::StatusOr<ModelStats> stats = engine.GetModelStats(name);
    if (!stats.ok()) return stats.status();
    if (absl::Status s = CheckVersion(name, version); !s.ok()) return s;
    inference::ModelStatistics* out = response->add_model_stats();
    out->set_name(name);
    out->set_version(kModelVersion);
    out->set_last_inference(stats->last_inference_ms);
    out->set_inference_count(stats->inference_count);
    out->set_execution_count(stats->execution_count);
    inference::InferStatistics* infer = out->mutable_inference_stats();
    FillDuration(stats->success, infer->mutable_success());
    FillDuration(stats->fail, infer->mutable_fail());
    FillDuration(stats->queue, infer->mutable_queue());
    FillDuration(stats->compute_input, infer->mutable_compute_input());
    FillDuration(stats->compute_infer, infer->mutable_compute_infer());
    FillDuration(stats->compute_output, infer->mutable_compute_output());
    for (const auto& [size, d] : stats->batch_stats) {
      inference::InferBatchStatistics* b = out->add_batch_stats();
      b->set_batch_size(size);
      FillDuration(d.compute_input, b->mutable_compute_input());
      FillDuration(d.compute_infer, b->mutable_compute_infer());
      FillDuration(d.compute_output, b->mutable_compute_output());
    }
  }
  return absl::OkStatus();
}

void FillRepositoryIndex(const Engine& engine, inference::RepositoryIndexResponse* response) {
  const bool ready = engine.Ready();
  for (const std::string& name : engine.ModelNames()) {
    auto* m = response->add_models();
    m->set_name(name);
    m->set_version(kModelVersion);
    m->set_state(ready ? "READY" : "UNAVAILABLE");
  }
}

bool IsModelReady(const Engine& engine, const std::string& model, const std::string& version) {
  return CheckVersion(model, version).ok() && engine.ModelReady(model);
}

}  // namespace infer
