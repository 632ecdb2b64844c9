#include "server/json_log.h"

#include <chrono>
#include <cstdio>
#include <ctime>

namespace infer {
namespace {

// The length of the valid UTF-8 sequence at `s` (at most `n` bytes), or 0.
size_t Utf8Length(const unsigned char* s, size_t n) {
  const unsigned char c = s[0];
  size_t len = 0;
  uint32_t min = 0;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) {
    len = 2;
    min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    min = 0x10000;
  } else {
    return 0;
  }
  if (len > n) return 0;
  uint32_t cp = c & (0x7F >> len);
  for (size_t i = 1; i < len; ++i) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

const char* LevelName(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
      return "TRACE";
    case spdlog::level::debug:
      return "DEBUG";
    case spdlog::level::info:
      return "INFO";
    case spdlog::level::warn:
      return "WARN";
    case spdlog::level::err:
      return "ERROR";
    case spdlog::level::critical:
      return "CRITICAL";
    default:
      return "OFF";
  }
}

}  // namespace

std::string JsonEscape(absl::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = s[i];
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
      ++i;
    } else if (c == '\n') {
      out += "\\n";
      ++i;
    } else if (c == '\t') {
      out += "\\t";
      ++i;
    } else if (c == '\r') {
      out += "\\r";
      ++i;
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
      ++i;
    } else {
      const size_t len = Utf8Length(s + i, text.size() - i);
      if (len == 0) {
        out += "\xEF\xBF\xBD";  // U+FFFD
        ++i;
      } else {
        out.append(text.data() + i, len);
        i += len;
      }
    }
  }
  return out;
}

void JsonLogFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  const auto since_epoch = msg.time.time_since_epoch();
  const std::time_t seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch).count();
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(since_epoch).count() % 1000000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char stamp[40];
  std::snprintf(stamp, sizeof(stamp), "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<long long>(micros));
  std::string line = "{\"timestamp\":\"";
  line += stamp;
  line += "\",\"level\":\"";
  line += LevelName(msg.level);
  line += "\",\"message\":\"";
  line += JsonEscape(absl::string_view(msg.payload.data(), msg.payload.size()));
  line += "\",\"target\":\"infer_server\"}\n";
  dest.append(line.data(), line.data() + line.size());
}

}  // namespace infer
