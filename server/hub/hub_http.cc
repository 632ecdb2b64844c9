#include "server/hub/hub_http.h"

#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "runtime/build_config.h"

namespace infer::hub {
namespace {

struct CurlDeleter {
  void operator()(CURL* h) const { curl_easy_cleanup(h); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using Curl = std::unique_ptr<CURL, CurlDeleter>;

// Header lines of the transfer's responses: a status line starts a new
// response (after a redirect, or a 100 Continue), whose headers replace the
// last one's.
size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* headers = static_cast<std::map<std::string, std::string>*>(user);
  const size_t n = size * count;
  absl::string_view line(data, n);
  line = absl::StripTrailingAsciiWhitespace(line);
  if (absl::StartsWith(line, "HTTP/")) {
    headers->clear();
    return n;
  }
  const size_t colon = line.find(':');
  if (colon == absl::string_view::npos) return n;
  std::string name = absl::AsciiStrToLower(line.substr(0, colon));
  (*headers)[name] = std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  return n;
}

// What every request shares: protocols, redirects, time limits, the token.
Curl NewHandle(const std::string& url, const std::string& token, bool follow) {
  Curl h(curl_easy_init());
  if (!h) return h;
  CURL* c = h.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, follow ? 1L : 0L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 15L);
  // A transfer under 1 byte/s for a minute is stalled.
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
  const std::string agent = absl::StrCat("infer-server/", INFER_VERSION, " ", curl_version());
  curl_easy_setopt(c, CURLOPT_USERAGENT, agent.c_str());  // copied by libcurl
  if (!token.empty()) {
    // Bearer auth through libcurl rather than a raw header: libcurl sends
    // it to the original host only, never to a redirect's other host.
    curl_easy_setopt(c, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BEARER));
    curl_easy_setopt(c, CURLOPT_XOAUTH2_BEARER, token.c_str());
  }
  return h;
}

struct BodySink {
  std::string* body;
  int64_t max_bytes;
  bool too_big = false;
};

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<BodySink*>(user);
  const size_t n = size * count;
  if (static_cast<int64_t>(sink->body->size() + n) > sink->max_bytes) {
    sink->too_big = true;
    return 0;  // aborts the transfer
  }
  sink->body->append(data, n);
  return n;
}

struct FileSink {
  CURL* curl;
  int fd;
  int64_t offset;  // bytes the file had before
  int64_t size_limit;
  int64_t base = 0;  // where this transfer's bytes start in the file
  const std::map<std::string, std::string>* headers;
  const std::function<bool(int64_t)>* progress;
  DownloadAnswer* answer;
  bool started = false;
  bool to_file = false;
  int64_t written = 0;
};

// The start of a 206 answer's Content-Range ("bytes START-END/TOTAL").
bool RangeStartsAt(const std::map<std::string, std::string>& headers, int64_t offset) {
  auto it = headers.find("content-range");
  if (it == headers.end()) return false;
  absl::string_view v = it->second;
  if (!absl::ConsumePrefix(&v, "bytes ")) return false;
  const size_t dash = v.find('-');
  int64_t start = -1;
  return dash != absl::string_view::npos && absl::SimpleAtoi(v.substr(0, dash), &start) &&
         start == offset;
}

size_t OnFileData(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<FileSink*>(user);
  const size_t n = size * count;
  if (!sink->started) {
    sink->started = true;
    long code = 0;
    curl_easy_getinfo(sink->curl, CURLINFO_RESPONSE_CODE, &code);
    if (code == 206 && sink->offset > 0) {
      if (!RangeStartsAt(*sink->headers, sink->offset)) {
        sink->answer->error = "the server answered another range than the one asked for";
        return 0;
      }
      sink->to_file = lseek(sink->fd, sink->offset, SEEK_SET) == sink->offset;
      sink->base = sink->offset;
    } else if (code == 200) {
      sink->answer->restarted = sink->offset > 0;
      sink->to_file = ftruncate(sink->fd, 0) == 0 && lseek(sink->fd, 0, SEEK_SET) == 0;
    } else {
      sink->to_file = false;  // an error's body: kept for the message
    }
    if ((code == 200 || code == 206) && !sink->to_file) {
      sink->answer->error = absl::StrCat("cannot write the file: ", std::strerror(errno));
      return 0;
    }
  }
  if (!sink->to_file) {
    if (sink->answer->body.size() < 4096)
      sink->answer->body.append(data, std::min<size_t>(n, 4096));
    return n;
  }
  // Bytes past the limit are not written; the transfer stops after those
  // before it.
  const int64_t room = std::max<int64_t>(sink->size_limit - sink->base - sink->written, 0);
  const size_t take = std::min<size_t>(n, static_cast<size_t>(room));
  size_t done = 0;
  while (done < take) {
    const ssize_t w = write(sink->fd, data + done, take - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      sink->answer->error = absl::StrCat("cannot write the file: ", std::strerror(errno));
      return 0;
    }
    done += static_cast<size_t>(w);
  }
  sink->written += static_cast<int64_t>(take);
  if (take < n) {
    sink->answer->error =
        absl::StrCat("the server sent more than the ", sink->size_limit, " bytes the file has");
    return 0;
  }
  if (*sink->progress && !(*sink->progress)(sink->written)) {
    sink->answer->error = "stopped";
    return 0;
  }
  return n;
}

}  // namespace

void InitHubHttp() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string HttpAnswer::Header(const std::string& lowercase_name) const {
  auto it = headers.find(lowercase_name);
  return it == headers.end() ? std::string() : it->second;
}

HttpAnswer Fetch(const HttpCall& call) {
  HttpAnswer answer;
  Curl h = NewHandle(call.url, call.token, call.follow_redirects);
  if (!h) {
    answer.error = "cannot create a libcurl handle";
    return answer;
  }
  CURL* c = h.get();
  BodySink sink{&answer.body, call.max_body_bytes};
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &answer.headers);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  if (call.method == "HEAD") curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  // API answers may come compressed; file bytes (Download) never are.
  curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
  if (call.timeout_s > 0) curl_easy_setopt(c, CURLOPT_TIMEOUT, static_cast<long>(call.timeout_s));
  std::unique_ptr<curl_slist, SlistDeleter> extra(curl_slist_append(nullptr, "Accept: */*"));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, extra.get());
  const CURLcode rc = curl_easy_perform(c);
  if (sink.too_big) {
    answer.status = 0;
    answer.error = absl::StrCat("the answer is larger than ", call.max_body_bytes, " bytes");
    return answer;
  }
  if (rc != CURLE_OK) {
    answer.status = 0;
    answer.error = curl_easy_strerror(rc);
    return answer;
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &answer.status);
  return answer;
}

DownloadAnswer Download(const std::string& url, const std::string& token, int fd, int64_t offset,
                        int64_t size_limit, const std::function<bool(int64_t)>& progress) {
  DownloadAnswer answer;
  Curl h = NewHandle(url, token, /*follow=*/true);
  if (!h) {
    answer.error = "cannot create a libcurl handle";
    return answer;
  }
  CURL* c = h.get();
  FileSink sink{c, fd, offset, size_limit, 0, &answer.headers, &progress, &answer};
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &answer.headers);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &OnFileData);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  const std::string range = absl::StrCat(offset, "-");
  if (offset > 0) curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
  const CURLcode rc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &answer.status);
  if (rc != CURLE_OK) {
    if (answer.error.empty()) answer.error = curl_easy_strerror(rc);
    answer.status = 0;
  }
  return answer;
}

std::string UrlEncode(absl::string_view text) {
  // libcurl's own escaping: every byte but [A-Za-z0-9._~-] as %XX.
  char* escaped = curl_easy_escape(nullptr, text.data(), static_cast<int>(text.size()));
  if (escaped == nullptr) return std::string();
  std::string out(escaped);
  curl_free(escaped);
  return out;
}

}  // namespace infer::hub
