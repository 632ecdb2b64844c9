// infer-server's command-line options and their TOML config file (CLI11):
// what they are, their defaults and the checks on their values. Shared by
// main.cc and the config-file fuzz target (fuzz/server_toml_fuzz.cc).
#ifndef INFER_SERVER_SERVER_FLAGS_H_
#define INFER_SERVER_SERVER_FLAGS_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace infer {

struct ServerFlags {
  std::string grpc_address = "127.0.0.1:8001";
  std::string device;
  std::string model_repository;
  std::vector<std::string> models;  // --model [NAME=]DIR, in order
  // --model-id [NAME=]ORG/NAME (or a folder, as TEI takes it), in order, at
  // --revision; the hub's token from --hf-token (HF_TOKEN) or a file.
  std::vector<std::string> model_ids;
  std::string revision = "main";
  std::string hf_token;  // never logged
  std::string hf_token_file;
  std::string precision = "auto";  // for configs that name none (models/precision.h names)
  // For Hugging Face folders served without a config.pbtxt (TEI's options of
  // the same names); empty: what the folder's files say.
  std::string pooling;        // mean, cls, last_token (or TEI's last-token), splade
  bool auto_truncate = true;  // false: texts over the model's length are refused
  std::string default_prompt_name;
  bool precision_gate = true;  // false: models served unchecked (precision_gate: false)
  int64_t max_receive_message_bytes = 64 << 20;
  double drain_grace_s = 5.0;
  double drain_timeout_s = 20.0;
  std::string metrics_address = "127.0.0.1:8002";
  std::string http_address = "127.0.0.1:8000";
  int http_threads = 2;
  int http_max_connections = 1024;
  int64_t http_max_buffered_body_bytes = int64_t{256} << 20;
  double http_request_timeout_s = 30.0;
  double http_idle_timeout_s = 60.0;
  double log_summary_interval_s = 10.0;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  bool http_tls = true;      // the TLS files apply to the HTTP and metrics ports too
  std::string api_key;       // --api-key or API_KEY (never logged)
  std::string api_key_file;  // or its first line
  int64_t memory_budget_bytes = 0;
  double memory_budget_fraction = 0.9;
  double memory_headroom_fraction = 0.1;
  std::string device_lock_dir;
  int cpu_threads = 0;
  std::string log_level = "info";
  bool json_output = false;  // log lines as JSON objects (TEI's --json-output)

  // TEI's router options that have no native name here (server/tei_flags.h
  // turns them into the options above; 0 and empty: not given).
  std::string served_model_name;
  std::string default_prompt;
  std::string dense_path;
  int64_t max_batch_tokens = 0;
  int64_t max_batch_requests = 0;
  int64_t max_concurrent_requests = 0;
  int64_t max_client_batch_size = 0;
  std::string hostname;
  int port = 0;
  int prometheus_port = 0;
  int64_t payload_limit = 0;
  int tokenization_workers = 0;
  std::string huggingface_hub_cache;
  std::string hf_api_token;  // TEI's deprecated name of --hf-token
  std::vector<std::string> cors_allow_origin;
  // Accepted so that TEI's manifests start; nothing here uses them.
  std::string uds_path;
  std::string otlp_endpoint;
  std::string otlp_service_name;
  bool disable_spans = false;
};

// The --help text's description of the server.
extern const char kServerDescription[];

// Adds every option (and --version, --config) to `app`, bound to `flags`.
// app->parse() then fills them, from the command line and the --config
// file, and throws a CLI::ParseError for a bad value or an unknown option.
void AddServerFlags(CLI::App* app, ServerFlags* flags);

}  // namespace infer

#endif  // INFER_SERVER_SERVER_FLAGS_H_
