// infer-server: serves the models of a model repository over the KServe v2
// protocol, on gRPC and on HTTP (KServe REST and OpenAI's /v1/embeddings),
// with Prometheus metrics; drains on SIGTERM. See --help.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <future>
#include <iostream>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "engine/engine.h"
#include "models/embed_pool/embed_pool.h"
#include "models/precision.h"
#include "runtime/build_config.h"
#include "runtime/nvml_telemetry.h"
#include "server/api_key.h"
#include "server/grpc/grpc_server.h"
#include "server/http/http_routes.h"
#include "server/http/http_server.h"
#include "server/http/http_tls.h"
#include "server/json_log.h"
#include "server/kserve/model_repository.h"
#include "server/metrics.h"
#include "server/model_ids.h"
#include "server/server_flags.h"
#include "server/tei_flags.h"
#include "server/tls_files.h"

namespace {

// Waits up to `timeout` for one of `signals`; the signal, or 0 on timeout.
int WaitForSignal(const sigset_t& signals, absl::Duration timeout) {
  const timespec ts = absl::ToTimespec(timeout);
  const int sig = sigtimedwait(&signals, nullptr, &ts);
  return sig > 0 ? sig : 0;
}

// The TLS files the HTTP and metrics ports share with gRPC, unless
// --http-tls=false keeps those two ports plaintext.
infer::HttpServerOptions HttpTls(const infer::ServerFlags& flags) {
  infer::HttpServerOptions o;
  if (flags.http_tls) {
    o.tls_cert_file = flags.tls_cert_file;
    o.tls_key_file = flags.tls_key_file;
    o.tls_client_ca_file = flags.tls_client_ca_file;
  }
  return o;
}

int Run(infer::ServerFlags flags, const sigset_t& signals) {
  // The API key, checked before anything is loaded (a bad flag ends here);
  // it outlives the front ends below, which borrow it. Never logged.
  const absl::StatusOr<infer::ApiKey> api_key =
      infer::ApiKey::FromFlags(flags.api_key, flags.api_key_file);
  if (!api_key.ok()) {
    spdlog::critical("{}", api_key.status().ToString());
    return 1;
  }
  flags.api_key.clear();
  // The TLS files, checked before anything is downloaded or loaded (every
  // port reads them again when it starts).
  if (const infer::HttpServerOptions tls = HttpTls(flags); !tls.tls_cert_file.empty()) {
    if (auto ctx = infer::MakeServerTlsContext(tls.tls_cert_file, tls.tls_key_file,
                                               tls.tls_client_ca_file);
        !ctx.ok()) {
      spdlog::critical("{}", ctx.status().ToString());
      return 1;
    }
  } else if (auto pem = infer::ReadTlsFiles(flags.tls_cert_file, flags.tls_key_file,
                                            flags.tls_client_ca_file);
             !pem.ok()) {
    spdlog::critical("{}", pem.status().ToString());
    return 1;
  }
  // --model-id: each model of the hub fetched into the cache (or found
  // there), then served from its snapshot folder as --model serves a folder.
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> aliases =
      infer::ResolveModelIds(&flags);
  if (!aliases.ok()) {
    spdlog::critical("{}", std::string(aliases.status().message()));
    return 1;
  }
  infer::EngineOptions engine_options;
  engine_options.device = flags.device;
  engine_options.memory.budget_bytes = flags.memory_budget_bytes;
  engine_options.memory.budget_fraction = flags.memory_budget_fraction;
  engine_options.memory_headroom_fraction = flags.memory_headroom_fraction;
  engine_options.device_lock_dir = flags.device_lock_dir;
  engine_options.device_options.cpu_threads = flags.cpu_threads;
  // A lost device (a sticky CUDA error) wakes the main thread, which drains
  // what it can and exits 1, so the supervisor restarts the process.
  engine_options.on_device_lost = [](const absl::Status& status) {
    spdlog::critical("the device is lost: {}; draining, then exiting with status 1",
                     std::string(status.message()));
    kill(getpid(), SIGUSR1);
  };
  absl::StatusOr<std::unique_ptr<infer::Engine>> engine = infer::Engine::Create(engine_options);
  if (!engine.ok()) {
    spdlog::critical("cannot start on the device: {}", engine.status().ToString());
    return 1;
  }
  const infer::DeviceInfo& dev = (*engine)->device()->info();
  spdlog::info("device {} ({}{})", (*engine)->device()->spec(), dev.name,
               dev.uuid.empty() ? "" : ", " + dev.uuid);
  if (dev.kind == infer::DeviceKind::kCpu) {
    spdlog::info("cpu: {} compute threads", dev.compute_threads);
    spdlog::info("CUDA: {}", infer::ProbeCuda().device_count > 0
                                 ? "available, but --device cpu was chosen"
                                 : infer::ProbeCuda().reason);
  }
  // GPU telemetry (the infer_gpu_* metrics, the log's GPU line): NVML when the
  // driver's library loads; otherwise say exactly why they are absent.
  std::unique_ptr<infer::NvmlTelemetry> gpu_telemetry;
  if (dev.kind == infer::DeviceKind::kCpu) {
    spdlog::debug("GPU telemetry: none (the device is the CPU)");
  } else if (auto opened = infer::NvmlTelemetry::Open(dev); opened.ok()) {
    gpu_telemetry = *std::move(opened);
    spdlog::info("GPU telemetry: {}", gpu_telemetry->Describe());
  } else {
    spdlog::warn("GPU telemetry: none, the infer_gpu_* metrics are absent: {}",
                 std::string(opened.status().message()));
  }

  if (flags.model_repository.empty() && flags.models.empty() &&
      std::filesystem::is_directory("model_repository")) {
    // The demo repository scripts/export-demo-models.sh prepares (MiniLM).
    flags.model_repository = "model_repository";
    spdlog::info("serving ./model_repository (no --model-repository or --model given)");
  }
  if (flags.model_repository.empty() && flags.models.empty()) {
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
  }
  infer::ServingDefaults defaults;
  // Checked against the names by the flag's own check.
  defaults.precision = *infer::ParsePrecision(flags.precision);
  if (!flags.pooling.empty()) {
    defaults.folder_params["pooling"] =
        flags.pooling == "last-token" ? "last_token" : flags.pooling;
  }
  defaults.folder_params["auto_truncate"] = flags.auto_truncate ? "true" : "false";
  if (!flags.default_prompt_name.empty()) {
    defaults.folder_params["prompt_name"] = flags.default_prompt_name;
  }
  if (!flags.default_prompt.empty()) defaults.folder_params["prompt"] = flags.default_prompt;
  if (!flags.precision_gate) defaults.folder_params["precision_gate"] = "false";
  if (!flags.dense_path.empty()) defaults.folder_params["dense_path"] = flags.dense_path;
  defaults.max_batch_tokens = static_cast<uint64_t>(flags.max_batch_tokens);
  defaults.max_batch_size = static_cast<uint32_t>(flags.max_batch_requests);
  defaults.max_queue_size = static_cast<uint32_t>(flags.max_concurrent_requests);
  defaults.max_client_batch_size = static_cast<uint64_t>(flags.max_client_batch_size);
  if (!flags.model_repository.empty()) {
    auto loaded = infer::LoadModelRepository(flags.model_repository, engine->get(), defaults);
    if (!loaded.ok()) {
      spdlog::critical("cannot load model repository: {}", loaded.status().ToString());
      return 1;
    }
    if (loaded->empty()) {
      spdlog::warn("model repository '{}' holds no model folders", flags.model_repository);
    }
  }
  if (!flags.models.empty()) {
    auto loaded = infer::LoadModelFolders(flags.models, engine->get(), defaults);
    if (!loaded.ok()) {
      spdlog::critical("cannot load --model: {}", loaded.status().ToString());
      return 1;
    }
  }
  for (const auto& [alias, name] : *aliases) {
    if (absl::Status s = (*engine)->AddAlias(alias, name); !s.ok()) {
      spdlog::critical("cannot name model '{}' '{}' too: {}", name, alias, s.ToString());
      return 1;
    }
    spdlog::info("model '{}' also answers to '{}'", name, alias);
  }
  for (const std::string& name : (*engine)->ModelNames()) {
    const infer::QueueOptions q = *(*engine)->GetBatchingOptions(name);
    const infer::RequestLimits l = *(*engine)->GetRequestLimits(name);
    const infer::ModelSpec& spec = **(*engine)->GetModelSpec(name);
    if (!spec.description.empty()) spdlog::info("model '{}': {}", name, spec.description);
    spdlog::info(
        "model '{}' ready: backend {}, precision {}{}; max_batch_size {}, max_batch_tokens {}, "
        "max_queue_delay_us {}, max_queue_size {}, length buckets [{}], priority levels {}; "
        "request limits: max_client_batch_size {}, max_input_length {}, max_request_tokens {}, "
        "max_tensor_elements {}, max_text_bytes {}",
        name, spec.backend, spec.precision.empty() ? "none" : spec.precision,
        spec.implementation.empty() ? "" : " (" + spec.implementation + ")", q.max_batch_size,
        q.max_batch_tokens, absl::ToInt64Microseconds(q.max_queue_delay), q.max_queue_size,
        absl::StrJoin(q.length_buckets, ","), q.priority_levels, l.max_client_batch_size,
        l.max_input_length, l.max_request_tokens, l.max_tensor_elements, l.max_text_bytes);
  }

  {
    const infer::AllocatorStats m = (*engine)->allocator()->stats();
    spdlog::info(
        "device memory: budget {} bytes, {} reserved and {} allocated after loading; {} bytes "
        "for batches",
        m.budget_bytes, m.reserved_bytes, m.allocated_bytes, (*engine)->ActivationCapacityBytes());
  }

  std::unique_ptr<infer::MetricsServer> metrics;
  if (!flags.metrics_address.empty()) {
    auto started = infer::MetricsServer::Start(flags.metrics_address, engine->get(),
                                               gpu_telemetry.get(), &*api_key, HttpTls(flags));
    if (!started.ok()) {
      spdlog::critical("{}", started.status().ToString());
      return 1;
    }
    metrics = *std::move(started);
    const std::string host = flags.metrics_address.substr(0, flags.metrics_address.rfind(':'));
    spdlog::info("metrics at {}://{}:{}/metrics",
                 HttpTls(flags).tls_cert_file.empty() ? "http" : "https", host, metrics->port());
  }
  std::unique_ptr<infer::LatencyReporter> reporter;
  if (flags.log_summary_interval_s > 0) {
    reporter = std::make_unique<infer::LatencyReporter>(
        engine->get(), absl::Seconds(flags.log_summary_interval_s), gpu_telemetry.get());
  }

  // The REST front end (KServe v2 REST, OpenAI embeddings, /metrics),
  // started (and logged) before gRPC, whose line tests wait for.
  std::unique_ptr<infer::HttpServer> http;
  if (!flags.http_address.empty()) {
    infer::HttpServerOptions http_options;
    http_options.address = flags.http_address;
    http_options.threads = flags.http_threads;
    http_options.max_body_bytes = flags.max_receive_message_bytes;
    http_options.max_buffered_body_bytes =
        std::max<int64_t>(flags.max_receive_message_bytes, flags.http_max_buffered_body_bytes);
    http_options.max_connections = flags.http_max_connections;
    http_options.request_timeout = absl::Seconds(flags.http_request_timeout_s);
    http_options.idle_timeout = absl::Seconds(flags.http_idle_timeout_s);
    http_options.cors_allow_origins = flags.cors_allow_origin;
    const infer::HttpServerOptions tls = HttpTls(flags);
    http_options.tls_cert_file = tls.tls_cert_file;
    http_options.tls_key_file = tls.tls_key_file;
    http_options.tls_client_ca_file = tls.tls_client_ca_file;
    auto started = infer::HttpServer::Start(
        http_options, infer::MakeRestHandler(engine->get(), gpu_telemetry.get(), &*api_key));
    if (!started.ok()) {
      spdlog::critical("{}", started.status().ToString());
      return 1;
    }
    http = *std::move(started);
    const std::string http_host = flags.http_address.substr(0, flags.http_address.rfind(':'));
    spdlog::info("HTTP (KServe v2 REST, OpenAI /v1/embeddings, /metrics) on {}://{}:{}{}",
                 tls.tls_cert_file.empty() ? "http" : "https", http_host, http->port(),
                 tls.tls_client_ca_file.empty() ? "" : " (mutual TLS)");
  }

  infer::GrpcServerOptions server_options;
  server_options.address = flags.grpc_address;
  server_options.max_receive_message_bytes = flags.max_receive_message_bytes;
  server_options.tls_cert_file = flags.tls_cert_file;
  server_options.tls_key_file = flags.tls_key_file;
  server_options.tls_client_ca_file = flags.tls_client_ca_file;
  server_options.api_key = &*api_key;
  auto server = infer::GrpcServer::Start(server_options, engine->get());
  if (!server.ok()) {
    spdlog::critical("{}", server.status().ToString());
    return 1;
  }
  // Tests and scripts wait for this exact line to learn the bound port.
  const std::string host = flags.grpc_address.substr(0, flags.grpc_address.rfind(':'));
  if (api_key->enabled()) {
    spdlog::info("API key required on every route and call but the health checks and /metrics");
  }
  spdlog::info("infer-server listening on {}:{}{}", host, (*server)->port(),
               flags.tls_cert_file.empty()        ? " (plaintext)"
               : flags.tls_client_ca_file.empty() ? " (TLS)"
                                                  : " (mutual TLS)");

  int sig = 0;
  for (;;) {
    sigwait(&signals, &sig);
    // SIGUSR1 is how the engine reports a lost device; one from outside
    // (the device still works) is ignored.
    if (sig != SIGUSR1 || (*engine)->GetDeviceHealth().lost) break;
  }
  const bool device_lost = sig == SIGUSR1;
  if (device_lost) (*server)->RefreshHealth();
  infer::Engine* raw_engine = engine->get();
  // The drain, in three steps (README, "Running more than one"):
  // 1. Grace: health, ServerReady and the ready metric say not ready, but
  //    requests are still taken and answered for --drain-grace-s, so health
  //    checks and endpoint removal move traffic away before anything is
  //    refused. Skipped after a lost device (nothing could be served).
  if (!device_lost && flags.drain_grace_s > 0) {
    raw_engine->BeginDrain();
    (*server)->RefreshHealth();  // health watchers hear it at once
    spdlog::info(
        "received signal {}; health is NOT_SERVING, still serving for {} s (--drain-grace-s) so "
        "load balancers move traffic away; a second signal stops at once",
        sig, flags.drain_grace_s);
    if (const int again = WaitForSignal(signals, absl::Seconds(flags.drain_grace_s)); again != 0) {
      spdlog::warn("received signal {} during the drain's grace period; stopping now", again);
      spdlog::shutdown();
      std::_Exit(1);
    }
  }
  // 2. Stop accepting: gRPC's Shutdown sends GOAWAY, so proxies and clients
  //    open new streams elsewhere; the calls already accepted run on.
  // 3. Answer them all, then exit 0, within --drain-timeout-s; open
  //    ModelStreamInfer streams end once what they read is answered, so an
  //    idle one cannot hold the exit. A drain that does not finish in time
  //    exits 1 at the deadline.
  const absl::Duration timeout = absl::Seconds(flags.drain_timeout_s);
  const absl::Time deadline = absl::Now() + timeout;
  spdlog::info(
      "{}draining: accepting no new calls (GOAWAY), answering the accepted ones (at most {} s; "
      "a second signal stops at once)",
      device_lost || flags.drain_grace_s <= 0 ? absl::StrCat("received signal ", sig, "; ") : "",
      flags.drain_timeout_s);
  // The value: whether gRPC's Shutdown also returned (every connection
  // closed), not only every request answered.
  std::promise<bool> drained;
  std::future<bool> drained_future = drained.get_future();
  infer::GrpcServer* raw_server = server->get();
  infer::HttpServer* raw_http = http.get();
  std::thread drainer([raw_engine, raw_server, raw_http, timeout, deadline, &drained] {
    raw_server->StopAccepting(timeout);
    // HTTP: the listener and idle keep-alive connections close; answers in
    // flight are written with "Connection: close".
    if (raw_http != nullptr) raw_http->StopAccepting();
    // Calls gRPC took just before its Shutdown took effect are still on their
    // way to the engine; one that arrived after Engine::Shutdown would be
    // refused UNAVAILABLE (measured behind nginx, which has no health checks
    // and so sends until the GOAWAY: 1-2 per rolling restart without this
    // pause, none in runs with it). gRPC itself refuses later calls.
    absl::SleepFor(absl::Milliseconds(250));
    // Runs what is queued at once and returns when every request it took is
    // answered.
    raw_engine->Shutdown();
    // Up to 2 s for gRPC to send the last answers and see the clients close
    // their connections, and for the last HTTP answers to be written.
    const absl::Time written_by = std::min(absl::Now() + absl::Seconds(2), deadline);
    bool done = raw_http == nullptr || raw_http->WaitIdle(written_by - absl::Now());
    done = raw_server->WaitStopped(written_by - absl::Now()) && done;
    drained.set_value(done);
  });
  while (drained_future.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    if (const int again = WaitForSignal(signals, std::min(left, absl::Milliseconds(50)));
        again != 0) {
      spdlog::warn("received signal {} while draining; stopping now", again);
      spdlog::shutdown();
      std::_Exit(1);
    }
  }
  if (drained_future.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    int64_t queued = 0;
    for (const std::string& name : raw_engine->ModelNames()) {
      for (int64_t d : raw_engine->GetQueueDepths(name).value_or(std::vector<int64_t>{})) {
        queued += d;
      }
    }
    spdlog::error(
        "drain timed out after {} s with {} requests still queued (and batches running); "
        "stopping without answering them",
        flags.drain_timeout_s, queued);
    // gRPC's Shutdown waits for every callback reactor to finish, and the
    // calls still open finish only when the engine answers them, which is
    // what did not happen in time. The process ends; the kernel closes the
    // connections, and clients see UNAVAILABLE.
    spdlog::shutdown();
    std::_Exit(1);
  }
  drainer.join();
  if (!drained_future.get()) {
    // Every request is answered and its answer handed to gRPC 2 s ago; what
    // gRPC still waits for is clients closing idle connections.
    spdlog::info("every accepted request is answered; not waiting for idle client connections");
    if (device_lost) {
      spdlog::critical("stopped after the device was lost; exit status 1");
    } else {
      spdlog::info("stopped");
    }
    spdlog::shutdown();
    std::_Exit(device_lost ? 1 : 0);
  }
  // Everything that borrows the engine goes before it.
  server->reset();
  http.reset();
  reporter.reset();
  metrics.reset();
  engine->reset();
  if (device_lost) {
    spdlog::critical("stopped after the device was lost; exit status 1");
    return 1;
  }
  spdlog::info("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil is built without NDEBUG, which leaves absl::Mutex's
  // deadlock detection on: every lock gRPC takes then updates a global lock
  // graph (about 1% of the server's CPU at concurrency 1). It is a debugging
  // aid; this server's own locks are std::mutex, checked by ThreadSanitizer
  // in the tests.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  infer::ServerFlags flags;
  CLI::App app{infer::kServerDescription, "infer-server"};
  infer::AddServerFlags(&app, &flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const CLI::Option* config = app.get_config_ptr();
    if (e.get_exit_code() != 0 && config != nullptr && config->count() > 0) {
      // Say where the bad value may have come from.
      std::string what = e.what();
      const std::string extras = "INI was not able to parse ";
      if (what.rfind(extras, 0) == 0) what = "unknown option '" + what.substr(extras.size()) + "'";
      std::cerr << "infer-server: " << what << " (options come from the command line and from "
                << "the config file '" << config->as<std::string>() << "')\n";
      return e.get_exit_code();
    }
    return app.exit(e);
  }
  spdlog::set_level(spdlog::level::from_str(flags.log_level));
  if (flags.json_output) spdlog::set_formatter(std::make_unique<infer::JsonLogFormatter>());
  // TEI's options, as this server's (server/tei_flags.h).
  std::vector<std::string> notes;
  if (absl::Status s = infer::ApplyTeiFlags(app, &flags, &notes); !s.ok()) {
    spdlog::critical("{}", std::string(s.message()));
    return 1;
  }
  for (const std::string& note : notes) spdlog::info("{}", note);

  // Block the stop signals in every thread; main waits for them with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);  // the engine's "device lost" (see Run)
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return Run(flags, signals);
}
