// infer-server: serves the models of a model repository over the KServe v2
// gRPC protocol. See --help.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "absl/strings/str_join.h"
#include "models/embed_pool.h"
#include "runtime/build_config.h"
#include "server/engine.h"
#include "server/grpc_server.h"
#include "server/model_repository.h"

namespace {

struct Flags {
  std::string grpc_address = "127.0.0.1:8001";
  std::string device;
  std::string model_repository;
  int64_t max_receive_message_bytes = 64 << 20;
  double shutdown_grace_s = 10.0;
  int64_t memory_budget_bytes = 0;
  double memory_budget_fraction = 0.9;
  double memory_headroom_fraction = 0.1;
  std::string device_lock_dir;
  std::string log_level = "info";
};

int Run(Flags flags, const sigset_t& signals) {
  infer::EngineOptions engine_options;
  engine_options.device = flags.device;
  engine_options.memory.budget_bytes = flags.memory_budget_bytes;
  engine_options.memory.budget_fraction = flags.memory_budget_fraction;
  engine_options.memory_headroom_fraction = flags.memory_headroom_fraction;
  engine_options.device_lock_dir = flags.device_lock_dir;
  absl::StatusOr<std::unique_ptr<infer::Engine>> engine = infer::Engine::Create(engine_options);
  if (!engine.ok()) {
    spdlog::critical("cannot start on the device: {}", engine.status().ToString());
    return 1;
  }
  const infer::DeviceInfo& dev = (*engine)->device()->info();
  spdlog::info("device {} ({}{})", (*engine)->device()->spec(), dev.name,
               dev.uuid.empty() ? "" : ", " + dev.uuid);
  if (dev.kind == infer::DeviceKind::kCpu) {
    spdlog::info("CUDA: {}", infer::ProbeCuda().device_count > 0
                                 ? "available, but --device cpu was chosen"
                                 : infer::ProbeCuda().reason);
  }

  if (flags.model_repository.empty() && std::filesystem::is_directory("model_repository")) {
    // The demo repository scripts/export-demo-models.sh prepares (MiniLM).
    flags.model_repository = "model_repository";
    spdlog::info("serving ./model_repository (no --model-repository given)");
  }
  if (flags.model_repository.empty()) {
    // No repository: serve the bundled demo model with its defaults.
    spdlog::info(
        "no model repository: serving the built-in demo model 'embed_pool' "
        "(scripts/export-demo-models.sh prepares ./model_repository with all-MiniLM-L6-v2)");
    infer::EmbedPoolOptions demo;
    auto model = infer::EmbedPoolModel::Create(demo, (*engine)->context());
    absl::Status s =
        model.ok() ? (*engine)->AddModel(*std::move(model), infer::QueueOptions{}) : model.status();
    if (!s.ok()) {
      spdlog::critical("cannot load the demo model: {}", s.ToString());
      return 1;
    }
  } else {
    auto loaded = infer::LoadModelRepository(flags.model_repository, engine->get());
    if (!loaded.ok()) {
      spdlog::critical("cannot load model repository: {}", loaded.status().ToString());
      return 1;
    }
    if (loaded->empty()) {
      spdlog::warn("model repository '{}' holds no model folders", flags.model_repository);
    }
  }
  for (const std::string& name : (*engine)->ModelNames()) {
    const infer::QueueOptions q = *(*engine)->GetBatchingOptions(name);
    const infer::RequestLimits l = *(*engine)->GetRequestLimits(name);
    spdlog::info(
        "model '{}' ready: max_batch_size {}, max_batch_tokens {}, max_queue_delay_us {}, "
        "max_queue_size {}, length buckets [{}], priority levels {}; request limits: "
        "max_client_batch_size {}, max_input_length {}, max_request_tokens {}, "
        "max_tensor_elements {}, max_text_bytes {}",
        name, q.max_batch_size, q.max_batch_tokens, absl::ToInt64Microseconds(q.max_queue_delay),
        q.max_queue_size, absl::StrJoin(q.length_buckets, ","), q.priority_levels,
        l.max_client_batch_size, l.max_input_length, l.max_request_tokens, l.max_tensor_elements,
        l.max_text_bytes);
  }

  {
    const infer::AllocatorStats m = (*engine)->allocator()->stats();
    spdlog::info(
        "device memory: budget {} bytes, {} reserved and {} allocated after loading; {} bytes "
        "for batches",
        m.budget_bytes, m.reserved_bytes, m.allocated_bytes, (*engine)->ActivationCapacityBytes());
  }

  infer::GrpcServerOptions server_options;
  server_options.address = flags.grpc_address;
  server_options.max_receive_message_bytes = flags.max_receive_message_bytes;
  auto server = infer::GrpcServer::Start(server_options, engine->get());
  if (!server.ok()) {
    spdlog::critical("{}", server.status().ToString());
    return 1;
  }
  // Tests and scripts wait for this exact line to learn the bound port.
  const std::string host = flags.grpc_address.substr(0, flags.grpc_address.rfind(':'));
  spdlog::info("infer-server listening on {}:{}", host, (*server)->port());

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("received signal {}; draining", sig);
  (*engine)->Shutdown();  // refuse new requests, answer every queued one
  (*server)->Shutdown(absl::Seconds(flags.shutdown_grace_s));
  // The server goes before the engine it borrows.
  server->reset();
  engine->reset();
  spdlog::info("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  CLI::App app{
      "infer-server: serves models over the KServe v2 / Triton gRPC inference protocol "
      "(inference.GRPCInferenceService) and grpc.health.v1, with dynamic batching "
      "on a bounded queue per model.\n\n"
      "With no --model-repository it serves ./model_repository when that folder exists "
      "(scripts/export-demo-models.sh puts all-MiniLM-L6-v2 there as 'minilm'), else the "
      "built-in demo model 'embed_pool' (INT64 input_ids [-1,-1] -> FP32 embedding [-1,384]).",
      "infer-server"};
  app.add_option("--grpc-address", flags.grpc_address,
                 "host:port to listen on (port 0 picks a free port)")
      ->capture_default_str();
  app.add_option("--device", flags.device,
                 "cpu or cuda:N (default: cuda:0 when a GPU is usable, else cpu)");
  app.add_option("--model-repository", flags.model_repository,
                 "folder with one sub-folder per model, each holding a config.pbtxt "
                 "(default: serve the bundled demo model)");
  app.add_option("--max-receive-message-bytes", flags.max_receive_message_bytes,
                 "largest gRPC request accepted; larger ones get RESOURCE_EXHAUSTED")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{2147483647}));
  app.add_option("--memory-budget-bytes", flags.memory_budget_bytes,
                 "hard cap on device memory reserved for weights and activations "
                 "(0: use --memory-budget-fraction)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--memory-budget-fraction", flags.memory_budget_fraction,
                 "when --memory-budget-bytes is 0: this fraction of the device's memory")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--memory-headroom-fraction", flags.memory_headroom_fraction,
                 "share of the budget kept free of batches: a batch launches only if weights, "
                 "batches in flight and its own estimated peak fit in the rest")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.99));
  app.add_option("--device-lock-dir", flags.device_lock_dir,
                 "directory for the per-GPU ownership lock files (default: $INFER_LOCK_DIR, "
                 "else /run/lock, else /tmp)");
  app.add_option("--shutdown-grace-s", flags.shutdown_grace_s,
                 "on SIGINT/SIGTERM: seconds to let in-flight RPCs finish")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--log-level", flags.log_level, "trace, debug, info, warn, error")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  app.set_version_flag("--version", std::string(INFER_VERSION));
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::from_str(flags.log_level));

  // Block the stop signals in every thread; main waits for them with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return Run(flags, signals);
}
