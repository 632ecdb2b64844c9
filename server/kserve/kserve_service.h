// The KServe v2 inference protocol's read-only calls over an Engine, as
// protobuf messages, shared by the gRPC front end (server/grpc/grpc_server.cc) and
// the REST front end (server/http_kserve.cc), which prints the same messages
// as JSON: one place decides what metadata, configuration, statistics and
// the repository index say.
//
// Errors: NOT_FOUND naming the loaded models for an unknown model, and
// naming the available version for an unknown version. Thread-safe as the
// Engine is.
#ifndef INFER_SERVER_KSERVE_KSERVE_SERVICE_H_
#define INFER_SERVER_KSERVE_KSERVE_SERVICE_H_

#include <string>

#include "absl/status/status.h"
#include "engine/engine.h"
#include "grpc_service.pb.h"

namespace infer {

void FillServerMetadata(inference::ServerMetadataResponse* response);

absl::Status FillModelMetadata(const Engine& engine, const std::string& model,
                               const std::string& version,
                               inference::ModelMetadataResponse* response);

absl::Status FillModelConfig(const Engine& engine, const std::string& model,
                             const std::string& version, inference::ModelConfigResponse* response);

// Every model's statistics when `model` is empty.
absl::Status FillModelStatistics(const Engine& engine, const std::string& model,
                                 const std::string& version,
                                 inference::ModelStatisticsResponse* response);

void FillRepositoryIndex(const Engine& engine, inference::RepositoryIndexResponse* response);

// Ready and the version exists.
bool IsModelReady(const Engine& engine, const std::string& model, const std::string& version);

}  // namespace infer

#endif  // INFER_SERVER_KSERVE_KSERVE_SERVICE_H_
