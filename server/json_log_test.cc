#include "server/json_log.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <regex>
#include <sstream>

namespace infer {
namespace {

TEST(JsonLogTest, EscapesWhatJsonRequires) {
  EXPECT_EQ(JsonEscape("a \"b\" \\ c"), "a \\\"b\\\" \\\\ c");
  EXPECT_EQ(JsonEscape("line\nnext\ttab\x01"), "line\\nnext\\ttab\\u0001");
  EXPECT_EQ(JsonEscape("Straße 日本"), "Straße 日本");
  // Invalid UTF-8 (a lone continuation byte, a truncated sequence, an
  // encoded surrogate) becomes U+FFFD, so the line still parses.
  EXPECT_EQ(JsonEscape("a\x80z"), "a\xEF\xBF\xBDz");
  EXPECT_EQ(JsonEscape("\xE6\x97"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(JsonEscape("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(JsonLogTest, OneObjectPerLineWithTeisFields) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger logger("test", sink);
  logger.set_formatter(std::make_unique<JsonLogFormatter>());
  logger.warn("model '{}' said \"{}\"", "minilm", "hi\n");
  const std::string line = out.str();
  EXPECT_TRUE(std::regex_match(
      line,
      std::regex(R"(\{"timestamp":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z","level":"WARN",)"
                 R"("message":"model 'minilm' said \\"hi\\n\\"","target":"infer_server"\}\n)")))
      << line;
}

}  // namespace
}  // namespace infer
