#include "server/tei_flags.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

namespace infer {
namespace {

// Parses `args` as infer-server would and applies TEI's options; the
// status of ApplyTeiFlags (parse errors fail the test).
absl::Status Parse(std::vector<std::string> args, ServerFlags* flags,
                   std::vector<std::string>* notes = nullptr) {
  CLI::App app;
  AddServerFlags(&app, flags);
  std::vector<const char*> argv = {"infer-server"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    ADD_FAILURE() << e.what();
    return absl::InternalError(e.what());
  }
  std::vector<std::string> ignored;
  return ApplyTeiFlags(app, flags, notes != nullptr ? notes : &ignored);
}

TEST(TeiFlagsTest, NothingGivenChangesNothing) {
  ServerFlags flags;
  ASSERT_TRUE(Parse({}, &flags).ok());
  const ServerFlags defaults;
  EXPECT_EQ(flags.http_address, defaults.http_address);
  EXPECT_EQ(flags.metrics_address, defaults.metrics_address);
  EXPECT_EQ(flags.max_receive_message_bytes, defaults.max_receive_message_bytes);
  EXPECT_EQ(flags.http_threads, defaults.http_threads);
}

TEST(TeiFlagsTest, TeisOptionsBecomeOurs) {
  ServerFlags flags;
  std::vector<std::string> notes;
  ASSERT_TRUE(Parse({"--model-id",
                     "BAAI/bge-m3",
                     "--revision",
                     "refs/pr/2",
                     "--dtype",
                     "float16",
                     "--pooling",
                     "last-token",
                     "--port",
                     "3000",
                     "--prometheus-port",
                     "9000",
                     "--payload-limit",
                     "2000000",
                     "--tokenization-workers",
                     "8",
                     "--max-batch-tokens",
                     "16384",
                     "--max-client-batch-size",
                     "32",
                     "--auto-truncate",
                     "false",
                     "--otlp-endpoint",
                     "http://otel:4317"},
                    &flags, &notes)
                  .ok());
  EXPECT_EQ(flags.model_ids, std::vector<std::string>{"BAAI/bge-m3"});
  EXPECT_EQ(flags.revision, "refs/pr/2");
  EXPECT_EQ(flags.precision, "fp16");
  EXPECT_EQ(flags.pooling, "last-token");
  // As TEI listens: every address.
  EXPECT_EQ(flags.http_address, "0.0.0.0:3000");
  EXPECT_EQ(flags.metrics_address, "0.0.0.0:9000");
  EXPECT_EQ(flags.max_receive_message_bytes, 2000000);
  EXPECT_EQ(flags.http_threads, 8);
  EXPECT_EQ(flags.max_batch_tokens, 16384);
  EXPECT_EQ(flags.max_client_batch_size, 32);
  EXPECT_FALSE(flags.auto_truncate);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("exports no OpenTelemetry traces"), std::string::npos);
}

TEST(TeiFlagsTest, HostnameKeepsOrSetsThePort) {
  ServerFlags flags;
  ASSERT_TRUE(Parse({"--hostname", "::1", "-p", "8080"}, &flags).ok());
  EXPECT_EQ(flags.http_address, "[::1]:8080");
  EXPECT_EQ(flags.metrics_address, "[::1]:8002");
  ServerFlags only_host;
  ASSERT_TRUE(Parse({"--hostname", "10.0.0.5"}, &only_host).ok());
  EXPECT_EQ(only_host.http_address, "10.0.0.5:8000");
  EXPECT_EQ(only_host.metrics_address, "10.0.0.5:8002");
  // An address given whole wins over --hostname (the container's config
  // file sets hostname; a command line may still name an address).
  ServerFlags explicit_address;
  ASSERT_TRUE(
      Parse({"--hostname", "0.0.0.0", "--http-address", "127.0.0.1:9000"}, &explicit_address).ok());
  EXPECT_EQ(explicit_address.http_address, "127.0.0.1:9000");
  EXPECT_EQ(explicit_address.metrics_address, "0.0.0.0:8002");
}

TEST(TeiFlagsTest, TheEnvironmentAsTeiReadsIt) {
  setenv("MODEL_ID", "intfloat/e5-small", 1);
  setenv("PORT", "80", 1);
  setenv("DTYPE", "bfloat16", 1);
  setenv("MAX_CONCURRENT_REQUESTS", "64", 1);
  setenv("JSON_OUTPUT", "true", 1);
  setenv("LOG_LEVEL", "WARN", 1);
  ServerFlags flags;
  const absl::Status s = Parse({}, &flags);
  for (const char* v :
       {"MODEL_ID", "PORT", "DTYPE", "MAX_CONCURRENT_REQUESTS", "JSON_OUTPUT", "LOG_LEVEL"}) {
    unsetenv(v);
  }
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(flags.model_ids, std::vector<std::string>{"intfloat/e5-small"});
  EXPECT_EQ(flags.http_address, "0.0.0.0:80");
  EXPECT_EQ(flags.precision, "bf16");
  EXPECT_EQ(flags.max_concurrent_requests, 64);
  EXPECT_TRUE(flags.json_output);
  EXPECT_EQ(flags.log_level, "warn");
}

TEST(TeiFlagsTest, ConflictsAreRefusedNamingBoth) {
  ServerFlags a;
  absl::Status s = Parse({"--port", "3000", "--http-address", "127.0.0.1:1"}, &a);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--port (PORT) and --http-address"), std::string::npos);
  ServerFlags b;
  EXPECT_FALSE(Parse({"--payload-limit", "1", "--max-receive-message-bytes", "2"}, &b).ok());
  ServerFlags c;
  EXPECT_FALSE(Parse({"--default-prompt", "q: ", "--default-prompt-name", "query"}, &c).ok());
  ServerFlags d;
  s = Parse({"--served-model-name", "x", "--model-id", "a/b", "--model-id", "c/d"}, &d);
  EXPECT_NE(s.message().find("names the one model served"), std::string::npos);
  ServerFlags e;
  EXPECT_FALSE(Parse({"--hf-api-token", "t1", "--hf-token", "t2"}, &e).ok());
}

TEST(TeiFlagsTest, TheDeprecatedTokenNameStillWorks) {
  ServerFlags flags;
  std::vector<std::string> notes;
  ASSERT_TRUE(Parse({"--hf-api-token", "hf_x"}, &flags, &notes).ok());
  EXPECT_EQ(flags.hf_token, "hf_x");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].find("hf_x"), std::string::npos);  // the token is never in a log line
}

}  // namespace
}  // namespace infer
