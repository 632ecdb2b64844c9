#include "server/server_flags.h"

#include <map>

#include "runtime/build_config.h"
#include "server/tei_flags.h"

namespace infer {

const char kServerDescription[] =
    "infer-server: serves models over the KServe v2 / Triton gRPC inference protocol "
    "(inference.GRPCInferenceService) and grpc.health.v1, over HTTP as KServe v2 REST and "
    "OpenAI-compatible /v1/embeddings, with dynamic batching on a bounded queue per model.\n\n"
    "--model DIR serves a Hugging Face / sentence-transformers folder as it is (config.json, "
    "model.safetensors, tokenizer.json or vocab.txt): the family, tokenizer, pooling and "
    "length are read from its files. "
    "With neither --model nor --model-repository it serves ./model_repository when that folder "
    "exists "
    "(scripts/export-demo-models.sh puts all-MiniLM-L6-v2 there as 'minilm'), else the "
    "built-in demo model 'embed_pool' (INT64 input_ids [-1,-1] -> FP32 embedding [-1,384]).";

void AddServerFlags(CLI::App* app, ServerFlags* flags) {
  // An option given twice takes its last value (a wrapper script's defaults
  // can be overridden by appending).
  app->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app->add_option("--grpc-address", flags->grpc_address,
                  "host:port to listen on (port 0 picks a free port)")
      ->capture_default_str();
  app->add_option("--device", flags->device,
                  "cpu or cuda:N (default: cuda:0 when a GPU is usable, else cpu)");
  app->add_option("--model-repository", flags->model_repository,
                  "folder with one sub-folder per model, each holding a config.pbtxt or a "
                  "Hugging Face folder's config.json (default: serve the bundled demo model)");
  app->add_option("--model", flags->models,
                  "[NAME=]DIR: serve the Hugging Face / sentence-transformers folder DIR as "
                  "NAME (default: the folder's name); its config.pbtxt, if any, applies; "
                  "repeatable, and with --model-repository too")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app->add_option("--model-id", flags->model_ids,
                  "[NAME=]ORG/NAME: serve this model of the Hugging Face Hub as NAME (default: "
                  "the part after '/'), downloading the files a served model needs into "
                  "huggingface_hub's cache (HF_HUB_CACHE, else $HF_HOME/hub, else "
                  "~/.cache/huggingface/hub) from HF_ENDPOINT (default https://huggingface.co); "
                  "files already there are not downloaded again. With HF_HUB_OFFLINE=1, or when "
                  "the hub cannot be reached, the cached copy is served. A folder is served as "
                  "--model serves it. Repeatable (TEI's --model-id; environment MODEL_ID)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->envname("MODEL_ID");
  app->add_option("--revision", flags->revision,
                  "branch, tag or commit of every --model-id (TEI's --revision; environment "
                  "REVISION)")
      ->capture_default_str()
      ->envname("REVISION");
  app->add_option("--hf-token", flags->hf_token,
                  "token for private and gated models of the hub (TEI's --hf-token; environment "
                  "HF_TOKEN; default: HUGGING_FACE_HUB_TOKEN, else the file `hf auth login` "
                  "writes). Visible on the process's command line: prefer HF_TOKEN or "
                  "--hf-token-file")
      ->envname("HF_TOKEN");
  app->add_option("--hf-token-file", flags->hf_token_file,
                  "read the hub's token from this file's first line")
      ->check(CLI::ExistingFile);
  app->add_option("--precision,--dtype", flags->precision,
                  "precision of every model whose config.pbtxt names none, and of Hugging Face "
                  "folders served without one (TEI's --dtype; environment DTYPE): auto, fp32, "
                  "bf16, fp16 (GPU), int8 (CPU) or fp8 (GPU, compute capability 8.9+), or TEI's "
                  "float32, bfloat16, float16; a backend that computes in one precision only "
                  "keeps its own")
      ->capture_default_str()
      ->envname("DTYPE")
      ->transform(CLI::CheckedTransformer(std::map<std::string, std::string>{{"auto", "auto"},
                                                                             {"fp32", "fp32"},
                                                                             {"bf16", "bf16"},
                                                                             {"fp16", "fp16"},
                                                                             {"int8", "int8"},
                                                                             {"fp8", "fp8"},
                                                                             {"float32", "fp32"},
                                                                             {"bfloat16", "bf16"},
                                                                             {"float16", "fp16"}},
                                          CLI::ignore_case));
  app->add_option("--pooling", flags->pooling,
                  "pooling of every Hugging Face folder served without a config.pbtxt (TEI's "
                  "--pooling): mean, cls, last_token (or last-token), or splade for a "
                  "*ForMaskedLM checkpoint (sparse vectors, POST /embed_sparse); default: the "
                  "folder's own (its modules.json / 1_Pooling)")
      ->check(CLI::IsMember({"mean", "cls", "last_token", "last-token", "splade"}))
      ->envname("POOLING");
  // A value may follow as its own argument (--auto-truncate false), as TEI
  // takes it: an option of 0 or 1 values rather than a flag.
  app->add_option("--auto-truncate", flags->auto_truncate,
                  "default true: cut texts longer than the model's maximum (as "
                  "sentence-transformers does), for every Hugging Face folder served without a "
                  "config.pbtxt (TEI's --auto-truncate; environment AUTO_TRUNCATE); "
                  "--auto-truncate=false refuses them instead (HTTP 422, gRPC INVALID_ARGUMENT, "
                  "naming both lengths). A request's truncate parameter (TEI's truncate: false) "
                  "overrides it")
      ->expected(0, 1)
      ->default_str("true")
      ->envname("AUTO_TRUNCATE");
  app->add_option("--default-prompt-name", flags->default_prompt_name,
                  "the prompt of config_sentence_transformers.json put before every text of every "
                  "Hugging Face folder served without a config.pbtxt (TEI's "
                  "--default-prompt-name); default: the file's default_prompt_name, if any")
      ->envname("DEFAULT_PROMPT_NAME");
  app->add_option("--precision-gate", flags->precision_gate,
                  "default true: check every Hugging Face folder served without a config.pbtxt "
                  "at load against the CPU's fp32 (a reduced precision on the CPU; every "
                  "precision on a GPU), refusing one that fails with its figures; false serves "
                  "them unchecked, as the log and /info then say (config.pbtxt: parameter "
                  "precision_gate)")
      ->capture_default_str();
  app->add_option("--max-receive-message-bytes", flags->max_receive_message_bytes,
                  "largest request accepted: a larger gRPC message gets RESOURCE_EXHAUSTED, a "
                  "larger HTTP body 413 (before it is read)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{2147483647}));
  app->add_option("--memory-budget-bytes", flags->memory_budget_bytes,
                  "hard cap on device memory reserved for weights and activations "
                  "(0: use --memory-budget-fraction)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app->add_option("--memory-budget-fraction", flags->memory_budget_fraction,
                  "when --memory-budget-bytes is 0: this fraction of the device's memory")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app->add_option("--memory-headroom-fraction", flags->memory_headroom_fraction,
                  "share of the budget kept free of batches: a batch launches only if weights, "
                  "batches in flight and its own estimated peak fit in the rest")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.99));
  app->add_option("--cpu-threads", flags->cpu_threads,
                  "threads the CPU device computes on (oneDNN and the encoder's kernels share "
                  "one OpenMP pool; 0: OMP_NUM_THREADS if set, else one per core this process "
                  "may use, after its CPU affinity and cgroup quota)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app->add_option("--device-lock-dir", flags->device_lock_dir,
                  "directory for the per-GPU ownership lock files (default: $INFER_LOCK_DIR, "
                  "else /run/lock, else /tmp)");
  app->add_option("--drain-grace-s", flags->drain_grace_s,
                  "on SIGTERM/SIGINT: health turns NOT_SERVING at once, but requests are still "
                  "accepted and served for this many seconds, so load balancers and endpoint "
                  "removal move traffic away first; then the drain (--drain-timeout-s). 0: "
                  "refuse new calls at once")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  app->add_option("--drain-timeout-s", flags->drain_timeout_s,
                  "after the grace period: stop accepting (GOAWAY, so clients and proxies go "
                  "elsewhere), answer every accepted request, exit 0; if that takes longer than "
                  "this many seconds, stop anyway and exit 1. Grace plus timeout must stay below "
                  "the supervisor's kill timeout (Kubernetes: terminationGracePeriodSeconds, "
                  "30 by default)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  app->add_option("--metrics-address", flags->metrics_address,
                  "host:port serving Prometheus metrics on GET /metrics alone (port 0 picks a "
                  "free port; IPv6 as [::1]:8002; an empty value turns this port off: "
                  "--http-address serves /metrics too). Loopback by default: use 0.0.0.0:8002 "
                  "to let other hosts scrape")
      ->capture_default_str();
  app->add_option("--http-address", flags->http_address,
                  "host:port of the HTTP front end: KServe v2 REST (/v2/...), OpenAI "
                  "embeddings (/v1/embeddings, /v1/models), TEI's /embed, /embed_all, "
                  "/embed_sparse, /similarity, /rerank, /predict, /tokenize, /decode, /info, /, "
                  "/invocations and /embeddings, "
                  "Cohere's /v1/rerank and /v2/rerank, one model's TEI routes under "
                  "/models/{name}/, and /metrics (port 0 picks a free "
                  "port; IPv6 as [::1]:8000, [::]:8000 for every address; empty: off). "
                  "Loopback by default")
      ->capture_default_str();
  app->add_option("--http-threads", flags->http_threads,
                  "threads running HTTP connections (parsing, JSON); no thread waits for "
                  "the model")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app->add_option("--http-max-connections", flags->http_max_connections,
                  "open HTTP connections at most; more are closed at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app->add_option("--http-max-buffered-body-bytes", flags->http_max_buffered_body_bytes,
                  "HTTP request bodies held at once, all connections together (at least "
                  "--max-receive-message-bytes); a request past it gets 503 before its body is "
                  "read")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app->add_option("--http-request-timeout-s", flags->http_request_timeout_s,
                  "an HTTP request (headers and body) must arrive, and its answer be taken, "
                  "within this many seconds; a slower client is disconnected")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app->add_option("--http-idle-timeout-s", flags->http_idle_timeout_s,
                  "an idle keep-alive HTTP connection is closed after this many seconds")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 86400.0));
  app->add_option("--log-summary-interval-s", flags->log_summary_interval_s,
                  "every this many seconds, log p50/p99 latency, answers, failures and queue "
                  "depth per model, device memory pressure and GPU telemetry (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  app->add_option("--tls-cert-file", flags->tls_cert_file,
                  "PEM certificate chain: serve gRPC, HTTP and metrics over TLS (needs "
                  "--tls-key-file; TLS 1.2 at least)")
      ->check(CLI::ExistingFile);
  app->add_option("--tls-key-file", flags->tls_key_file, "PEM private key of --tls-cert-file")
      ->check(CLI::ExistingFile);
  app->add_option("--tls-client-ca-file", flags->tls_client_ca_file,
                  "PEM CA bundle: require every client (gRPC, HTTP and metrics) to present a "
                  "certificate it signed (mutual TLS)")
      ->check(CLI::ExistingFile);
  app->add_option("--http-tls", flags->http_tls,
                  "whether the TLS options apply to the HTTP and metrics ports too (default "
                  "true); false keeps them plaintext, e.g. behind a proxy that terminates TLS, "
                  "with gRPC on TLS")
      ->capture_default_str();
  app->add_option("--api-key", flags->api_key,
                  "require this key on every HTTP route and gRPC call but the health checks "
                  "and /metrics (TEI's --api-key; environment API_KEY): HTTP requests send "
                  "Authorization: Bearer KEY, gRPC calls the metadata authorization: Bearer "
                  "KEY; others get 401 / UNAUTHENTICATED. Visible on the process's command "
                  "line: prefer --api-key-file or API_KEY")
      ->envname("API_KEY");
  app->add_option("--api-key-file", flags->api_key_file,
                  "read the key of --api-key from this file's first line")
      ->check(CLI::ExistingFile);
  app->add_option("--log-level", flags->log_level,
                  "trace, debug, info, warn, error, critical or off, any case (environment "
                  "LOG_LEVEL, as TEI's; warning and err are taken too)")
      ->capture_default_str()
      ->envname("LOG_LEVEL")
      ->transform(
          CLI::CheckedTransformer(std::map<std::string, std::string>{{"trace", "trace"},
                                                                     {"debug", "debug"},
                                                                     {"info", "info"},
                                                                     {"warn", "warn"},
                                                                     {"warning", "warn"},
                                                                     {"error", "error"},
                                                                     {"err", "error"},
                                                                     {"critical", "critical"},
                                                                     {"off", "off"}},
                                  CLI::ignore_case));
  app->add_flag("--json-output", flags->json_output,
                "log one JSON object per line (timestamp, level, message, target), as TEI's "
                "--json-output (environment JSON_OUTPUT)")
      ->envname("JSON_OUTPUT");
  AddTeiFlags(app, flags);
  app->set_version_flag("--version", std::string(INFER_VERSION));
  app->set_config(
      "--config", "",
      "TOML file of options, one per line by their long names without the leading dashes "
      "(e.g. grpc-address = \"0.0.0.0:8001\", memory-budget-fraction = 0.8); "
      "options given on the command line win over the file");
  app->allow_config_extras(false);
}

}  // namespace infer
