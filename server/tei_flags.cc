#include "server/tei_flags.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace infer {
namespace {

bool Given(const CLI::App& app, const char* name) {
  const CLI::Option* o = app.get_option_no_throw(name);
  return o != nullptr && o->count() > 0;
}

// A host for host:port: an IPv6 address in brackets.
std::string HostPart(const std::string& host) {
  if (host.find(':') != std::string::npos && host.front() != '[') return "[" + host + "]";
  return host;
}

absl::Status Conflict(const char* a, const char* b) {
  return absl::InvalidArgumentError(
      absl::StrCat(a, " and ", b, " both set the same thing; give one of them"));
}

}  // namespace

void AddTeiFlags(CLI::App* app, ServerFlags* flags) {
  const std::string tei = "TEI's; ";
  app->add_option("--served-model-name", flags->served_model_name,
                  "the name of the one model served (TEI's; environment SERVED_MODEL_NAME); a "
                  "name with '/' (TEI's default, the model id) is accepted in request bodies "
                  "beside the model's own name")
      ->envname("SERVED_MODEL_NAME");
  app->add_option("--default-prompt", flags->default_prompt,
                  "text put before every text of every Hugging Face folder served without a "
                  "config.pbtxt (TEI's; environment DEFAULT_PROMPT); not with "
                  "--default-prompt-name")
      ->envname("DEFAULT_PROMPT");
  app->add_option("--dense-path", flags->dense_path,
                  "the folder of the Dense module to use instead of the one modules.json lists "
                  "(TEI's; environment DENSE_PATH), e.g. 2_Dense_256")
      ->envname("DENSE_PATH");
  app->add_option("--max-batch-tokens", flags->max_batch_tokens,
                  "tokens in one batch at most, for every Hugging Face folder served without a "
                  "config.pbtxt (TEI's; environment MAX_BATCH_TOKENS; config.pbtxt: "
                  "dynamic_batching.max_batch_tokens); default: bounded by device memory alone")
      ->envname("MAX_BATCH_TOKENS")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app->add_option("--max-batch-requests", flags->max_batch_requests,
                  "requests in one batch at most, for those folders (TEI's; environment "
                  "MAX_BATCH_REQUESTS; config.pbtxt: max_batch_size); default 32")
      ->envname("MAX_BATCH_REQUESTS")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app->add_option(
         "--max-concurrent-requests", flags->max_concurrent_requests,
         "requests waiting per model at most, for those folders; more are refused at "
         "once (HTTP 503, gRPC UNAVAILABLE: queue is full) rather than left to wait (TEI's; "
         "environment MAX_CONCURRENT_REQUESTS; config.pbtxt: "
         "default_queue_policy.max_queue_size); default 1024")
      ->envname("MAX_CONCURRENT_REQUESTS")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  app->add_option("--max-client-batch-size", flags->max_client_batch_size,
                  "inputs in one request at most, for those folders (TEI's; environment "
                  "MAX_CLIENT_BATCH_SIZE; config.pbtxt: request_limits.max_client_batch_size); "
                  "default 1024")
      ->envname("MAX_CLIENT_BATCH_SIZE")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app->add_option("--hostname", flags->hostname,
                  "address the HTTP and metrics ports listen on unless --http-address or "
                  "--metrics-address says otherwise (TEI's; TEI's default 0.0.0.0 applies with "
                  "--port and --prometheus-port). Not read from the environment: shells and "
                  "containers set HOSTNAME to the machine's name");
  app->add_option("-p,--port", flags->port,
                  "the HTTP port, on every address unless --hostname says otherwise, as TEI "
                  "listens (TEI's; environment PORT); instead of --http-address")
      ->envname("PORT")
      ->check(CLI::Range(1, 65535));
  app->add_option("--prometheus-port", flags->prometheus_port,
                  "the metrics port, on every address unless --hostname says otherwise (TEI's; "
                  "environment PROMETHEUS_PORT); instead of --metrics-address")
      ->envname("PROMETHEUS_PORT")
      ->check(CLI::Range(1, 65535));
  app->add_option("--payload-limit", flags->payload_limit,
                  "largest request body in bytes (TEI's; environment PAYLOAD_LIMIT); instead of "
                  "--max-receive-message-bytes")
      ->envname("PAYLOAD_LIMIT")
      ->check(CLI::Range(int64_t{1}, int64_t{2147483647}));
  app->add_option("--tokenization-workers", flags->tokenization_workers,
                  "threads that tokenise (TEI's; environment TOKENIZATION_WORKERS): here the "
                  "HTTP threads, which parse and tokenise; instead of --http-threads")
      ->envname("TOKENIZATION_WORKERS")
      ->check(CLI::Range(1, 256));
  app->add_option("--huggingface-hub-cache", flags->huggingface_hub_cache,
                  "the Hugging Face cache --model-id uses (TEI's), instead of HF_HUB_CACHE");
  app->add_option("--hf-api-token", flags->hf_api_token,
                  tei + "deprecated name of --hf-token (environment HF_API_TOKEN)")
      ->envname("HF_API_TOKEN")
      ->group("");  // hidden, as TEI hides it
  app->add_option("--cors-allow-origin", flags->cors_allow_origin,
                  "origins browsers may call the HTTP port from (TEI's; environment "
                  "CORS_ALLOW_ORIGIN); * for any")
      ->envname("CORS_ALLOW_ORIGIN")
      ->delimiter(',');
  app->add_option("--uds-path", flags->uds_path,
                  tei + "the socket TEI's router and its Python backend share: none here")
      ->envname("UDS_PATH");
  app->add_option("--otlp-endpoint", flags->otlp_endpoint,
                  tei +
                      "no OpenTelemetry traces are exported here (metrics: /metrics); accepted "
                      "and ignored, with a line in the log")
      ->envname("OTLP_ENDPOINT");
  app->add_option("--otlp-service-name", flags->otlp_service_name, tei + "see --otlp-endpoint")
      ->envname("OTLP_SERVICE_NAME");
  app->add_flag("--disable-spans", flags->disable_spans, tei + "no spans in this server's log")
      ->envname("DISABLE_SPANS");
}

absl::Status ApplyTeiFlags(const CLI::App& app, ServerFlags* flags,
                           std::vector<std::string>* notes) {
  const bool port = Given(app, "--port");
  const bool hostname = Given(app, "--hostname");
  // The host and the port of an address, one of them replaced.
  auto with = [](const std::string& address, const std::string& host, int new_port) {
    const size_t colon = address.rfind(':');
    return absl::StrCat(host.empty() ? address.substr(0, colon) : HostPart(host), ":",
                        new_port > 0 ? std::to_string(new_port) : address.substr(colon + 1));
  };
  if (port && Given(app, "--http-address")) return Conflict("--port (PORT)", "--http-address");
  if (port || (hostname && !Given(app, "--http-address"))) {
    // TEI's --port listens on every address unless --hostname names one.
    flags->http_address =
        with(flags->http_address, hostname ? flags->hostname : "0.0.0.0", port ? flags->port : 0);
  }
  const bool prometheus = Given(app, "--prometheus-port");
  if (prometheus && Given(app, "--metrics-address")) {
    return Conflict("--prometheus-port (PROMETHEUS_PORT)", "--metrics-address");
  }
  if (prometheus || (hostname && !Given(app, "--metrics-address"))) {
    flags->metrics_address = with(flags->metrics_address, hostname ? flags->hostname : "0.0.0.0",
                                  prometheus ? flags->prometheus_port : 0);
  }
  if (Given(app, "--payload-limit")) {
    if (Given(app, "--max-receive-message-bytes")) {
      return Conflict("--payload-limit (PAYLOAD_LIMIT)", "--max-receive-message-bytes");
    }
    flags->max_receive_message_bytes = flags->payload_limit;
  }
  if (Given(app, "--tokenization-workers")) {
    if (Given(app, "--http-threads")) {
      return Conflict("--tokenization-workers (TOKENIZATION_WORKERS)", "--http-threads");
    }
    flags->http_threads = flags->tokenization_workers;
  }
  if (Given(app, "--hf-api-token")) {
    if (Given(app, "--hf-token")) return Conflict("--hf-api-token (HF_API_TOKEN)", "--hf-token");
    flags->hf_token = flags->hf_api_token;
    flags->hf_api_token.clear();
    notes->push_back("--hf-api-token (HF_API_TOKEN) is TEI's deprecated name of --hf-token");
  }
  if (!flags->default_prompt.empty() && !flags->default_prompt_name.empty()) {
    return Conflict("--default-prompt (DEFAULT_PROMPT)", "--default-prompt-name");
  }
  if (!flags->served_model_name.empty()) {
    if (flags->models.size() + flags->model_ids.size() != 1) {
      return absl::InvalidArgumentError(
          "--served-model-name (SERVED_MODEL_NAME) names the one model served; with several "
          "--model or --model-id, name each as NAME=...");
    }
  }
  if (!flags->otlp_endpoint.empty()) {
    notes->push_back(absl::StrCat("--otlp-endpoint (OTLP_ENDPOINT) ", flags->otlp_endpoint,
                                  " is ignored: this server exports no OpenTelemetry traces "
                                  "(its metrics are on /metrics)"));
  }
  if (Given(app, "--uds-path") || Given(app, "--otlp-service-name") ||
      Given(app, "--disable-spans")) {
    notes->push_back(
        "--uds-path, --otlp-service-name and --disable-spans have no effect here (no Python "
        "backend socket, no traces, no spans)");
  }
  return absl::OkStatus();
}

}  // namespace infer
