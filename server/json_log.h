// Log lines as JSON objects, one per line (infer-server --json-output, TEI's
// flag of that name), for log collectors that parse them:
//
//   {"timestamp":"2026-12-02T16:00:00.123456Z","level":"INFO",
//    "message":"model 'minilm' ready: ...","target":"infer_server"}
//
// The fields are those TEI's tracing-subscriber JSON layer writes with its
// event flattened (timestamp in UTC, RFC 3339; level in capitals; message;
// target), so that dashboards and filters written for TEI's logs keep
// working. The message is escaped as JSON requires; bytes that are not
// UTF-8 are replaced by U+FFFD, so every line parses.
//
// Thread-safe as spdlog formatters are: each sink owns its clone.
#ifndef INFER_SERVER_JSON_LOG_H_
#define INFER_SERVER_JSON_LOG_H_

#include <spdlog/formatter.h>

#include <memory>
#include <string>

#include "absl/strings/string_view.h"

namespace infer {

class JsonLogFormatter : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonLogFormatter>();
  }
};

// `text` as a JSON string's contents (no quotes around): ", \ and control
// characters escaped, invalid UTF-8 replaced by U+FFFD.
std::string JsonEscape(absl::string_view text);

}  // namespace infer

#endif  // INFER_SERVER_JSON_LOG_H_
