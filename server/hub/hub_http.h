// HTTP requests to the Hugging Face Hub (its API, its `resolve` URLs and
// the storage they redirect to), over libcurl.
//
// Why libcurl and not a client of our own over Boost.Beast: talking to the
// hub means TLS verified against the system's CA store, HTTP proxies as
// every tool honours them (HTTPS_PROXY, NO_PROXY), redirects to another
// host whose credentials must not leak, resumable ranges and stall
// detection. libcurl does all of it, is maintained, and is a Debian package
// (libcurl4-openssl-dev).
//
// The token goes out as `Authorization: Bearer TOKEN` to the host of the
// URL asked for only: libcurl drops it when a redirect leads to another
// host (the hub's storage URLs are signed and need none).
//
// Thread-safe: each call uses its own handle. InitHubHttp must have been
// called once before the first (it is not thread-safe itself).
#ifndef INFER_SERVER_HUB_HUB_HTTP_H_
#define INFER_SERVER_HUB_HUB_HTTP_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/strings/string_view.h"

namespace infer::hub {

// curl_global_init, once per process.
void InitHubHttp();

struct HttpAnswer {
  // The last response's status; 0 when none came (then `error` says why:
  // no connection, a name that does not resolve, TLS, a timeout).
  long status = 0;
  std::string error;
  // The last response's headers, names in lowercase.
  std::map<std::string, std::string> headers;
  // Its body, cut at the call's limit.
  std::string body;

  std::string Header(const std::string& lowercase_name) const;
};

struct HttpCall {
  std::string method = "GET";  // GET or HEAD
  std::string url;
  std::string token;  // empty: none
  // Follow redirects (at most 10, to http or https only). Off: a 3xx
  // answer is returned as it is, with its Location header.
  bool follow_redirects = true;
  // The most of the body kept (API answers: JSON listings).
  int64_t max_body_bytes = int64_t{64} << 20;
  // Whole-call limit; 0: none (the stall limit below still applies).
  int timeout_s = 60;
};

// One request. A transfer that stalls (under 1 byte/s for 60 s) or cannot
// connect in 15 s ends with status 0.
HttpAnswer Fetch(const HttpCall& call);

struct DownloadAnswer {
  long status = 0;    // as in HttpAnswer
  std::string error;  // no answer, or a failure writing the file
  std::string body;   // the start of an error answer's body
  std::map<std::string, std::string> headers;
  bool restarted = false;  // asked for a range, got the whole file (200)
};

// GETs `url` (redirects followed) into the open file `fd`, whose first
// `offset` bytes are already there: asks for the rest with `Range:
// bytes=offset-` and appends what a 206 answer brings (checking that its
// Content-Range starts at `offset`), or truncates the file and writes from
// the start when the server sends the whole file (200). The file never
// grows past `size_limit` bytes: a server that sends more is cut off with an
// error. `progress` is called with the bytes written so far by this call;
// returning false aborts the transfer.
DownloadAnswer Download(const std::string& url, const std::string& token, int fd, int64_t offset,
                        int64_t size_limit, const std::function<bool(int64_t)>& progress);

// `text` with every byte but [A-Za-z0-9._~-] percent-encoded (a revision
// such as refs/pr/1 is one path segment in the hub's URLs).
std::string UrlEncode(absl::string_view text);

}  // namespace infer::hub

#endif  // INFER_SERVER_HUB_HUB_HTTP_H_
