// HttpServer: HTTP/1.1 transport on Boost.Beast (Boost.Asio), over TCP or
// TLS (OpenSSL, through Boost.Asio's ssl::stream), for the REST front ends
// (KServe v2 REST, OpenAI embeddings, /metrics). It knows nothing
// of models: it reads a request, hands it to one handler, and writes what
// the handler answers, asynchronously, so no thread is held while the engine
// computes.
//
// Why Beast and not cpp-httplib (also a Debian package): cpp-httplib 0.11
// buffers a request line or header line of any length and reads chunked
// bodies past its payload limit, so a client could grow the server's memory
// without bound, and it holds a thread per keep-alive connection. Beast's
// parser enforces header and body limits as it reads.
//
// What a client is allowed, all bounded:
//  - headers: at most HttpServerOptions::max_header_bytes (else 431, and the
//    connection is closed);
//  - a body: at most max_body_bytes. A declared Content-Length over it is
//    answered 413 as soon as the headers are read, without reading the body
//    (and "Expect: 100-continue" is answered 413 instead of 100); a chunked
//    body is cut off with 413 when it passes the limit. The connection is
//    then closed, since the rest of the body is never read;
//  - bodies being read or held by requests in flight, all connections
//    together: at most max_buffered_body_bytes; a request that would pass it
//    is answered 503 with Retry-After before its body is read;
//  - connections: at most max_connections open; more are accepted and
//    closed at once;
//  - time: a request (headers and body) must arrive within request_timeout
//    and a response must be taken within it; an idle keep-alive connection
//    is closed after idle_timeout. A trickling client is cut off, not waited
//    for.
// Malformed requests get 400 and the connection is closed. Requests on one
// connection are answered in order, one at a time (no pipelining).
//
// Draining: StopAccepting closes the listening sockets and idle connections;
// a connection with a request in flight gets its answer with
// "Connection: close". WaitIdle waits for the answers.
//
// Ownership: the handler is called on the server's I/O threads and must not
// block; it answers through the HttpReply it is given, from any thread, at
// any time (an HttpReply that is dropped unanswered answers 500). The server
// stops its threads and closes every connection on destruction; a reply sent
// after that is dropped. Thread-safe.
#ifndef INFER_SERVER_HTTP_HTTP_SERVER_H_
#define INFER_SERVER_HTTP_HTTP_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace infer {

struct HttpServerOptions {
  // host:port: an IPv4 address, [IPv6] (e.g. [::1]:8000, [::]:8000 for both
  // families), or a name such as localhost; port 0 picks a free port.
  std::string address = "127.0.0.1:8000";
  // Threads running the connections (parsing, JSON, writing).
  int threads = 2;
  int64_t max_body_bytes = 64 << 20;
  int64_t max_buffered_body_bytes = int64_t{256} << 20;
  int64_t max_header_bytes = 16 << 10;
  int max_connections = 1024;
  absl::Duration request_timeout = absl::Seconds(30);
  absl::Duration idle_timeout = absl::Seconds(60);
  // Origins browsers may call from (CORS; "*" for any); empty: no CORS
  // headers. A request whose Origin is allowed gets
  // Access-Control-Allow-Origin on its answer, and a preflight (OPTIONS
  // with Access-Control-Request-Method) is answered 204 by the transport,
  // allowing GET and POST with Content-Type and Authorization; another
  // origin's requests are served as any other (the browser withholds the
  // answer from the page).
  std::vector<std::string> cors_allow_origins;
  // TLS (http_tls.h): every connection is TLS when tls_cert_file (a PEM
  // chain) is set, with tls_key_file its key; with tls_client_ca_file each
  // client must present a certificate that CA signed (mutual TLS). TLS 1.2
  // at least.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
};

struct HttpRequest {
  std::string method;                                        // as sent: "GET", "POST", ...
  std::string path;                                          // the target before any '?'
  std::string query;                                         // after the '?', undecoded
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;
  // Not the transport's: the values the handler's router took from the
  // path (e.g. {name} of /models/{name}/embed), decoded, for the route's
  // handler. Empty as the transport hands the request over.
  std::vector<std::pair<std::string, std::string>> path_params;
  // The first header named `name` (lower case), or empty.
  absl::string_view Header(absl::string_view name) const;
  // The path parameter named `name`, or empty.
  absl::string_view PathParam(absl::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
};

// The way a handler answers its request: exactly one of the calls, once.
class HttpReply {
 public:
  class Sink;  // the connection's side; internal
  explicit HttpReply(std::shared_ptr<Sink> sink) : sink_(std::move(sink)) {}
  HttpReply(HttpReply&&) = default;
  HttpReply& operator=(HttpReply&&) = default;
  ~HttpReply();

  // Sends `response` (written on the server's threads).
  void Send(HttpResponse response);
  // Runs `make` on the server's threads and sends what it returns: for work
  // (encoding) that should not run on the caller's thread, e.g. the engine's.
  void SendFrom(std::function<HttpResponse()> make);

 private:
  std::shared_ptr<Sink> sink_;
};

using HttpHandler = std::function<void(HttpRequest request, HttpReply reply)>;

class HttpServer {
 public:
  // Listens and starts the threads. INVALID_ARGUMENT for a malformed address
  // or options; UNAVAILABLE naming the address when it cannot listen.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  // Closes the listener and idle connections; answers in flight are still
  // written, with "Connection: close". Idempotent.
  void StopAccepting();
  // Waits until no request is in flight (handed to the handler and not yet
  // written); false if `timeout` passed first.
  bool WaitIdle(absl::Duration timeout);
  // Requests handed to the handler and not yet written.
  int64_t InFlight() const;
  // Body bytes reserved now against max_buffered_body_bytes (bodies being
  // read or held by requests in flight).
  int64_t BufferedBodyBytes() const;

  struct Core;  // internal

 private:
  explicit HttpServer(std::shared_ptr<Core> core);
  std::shared_ptr<Core> core_;
};

// Splits "host:port" ("[v6]:port" for IPv6). INVALID_ARGUMENT naming the
// address when the port is missing or not in [0, 65535].
absl::StatusOr<std::pair<std::string, int>> SplitHostPort(const std::string& address);

}  // namespace infer

#endif  // INFER_SERVER_HTTP_HTTP_SERVER_H_
