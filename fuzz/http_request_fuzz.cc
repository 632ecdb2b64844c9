// Raw bytes from a client, as the HTTP transport (server/http/http_server.h)
// reads them: the request line and headers within their limit, bodies by
// Content-Length or chunked within theirs, Expect: 100-continue, several
// requests on one keep-alive connection, the body budget, and the answers
// to all of it (400, 413, 431, 503, and the handler's own). The bytes go to
// a real HttpServer over a loopback connection, so they take exactly the
// server's path; the write side is then shut, and the target waits until
// the server closes the connection. Whatever the bytes, the server answers
// or closes; it never crashes, hangs past its timeouts, or holds more than
// its limits allow.
//
// The limits are small (8 KiB of body, 2 KiB of headers) so that fuzzed
// inputs pass them both ways. The handler answers the method, path, query,
// headers and body size it was handed, sometimes from another thread,
// sometimes through SendFrom, sometimes by dropping its reply (which the
// transport answers 500): the paths a real route takes. After each input
// the target checks that the server holds no request in flight and no body
// bytes reserved, so nothing leaks across connections.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/http/http_server.h"

namespace {

void Answer(infer::HttpRequest request, infer::HttpReply reply) {
  std::string body =
      absl::StrCat(request.method, " ", request.path, "?", request.query, " ",
                   request.headers.size(), " headers, ", request.body.size(), " bytes");
  const char last = request.path.empty() ? '/' : request.path.back();
  if (last == 'd') return;  // dropped: the transport answers 500
  if (last == 't') {        // answered later, from another thread
    auto shared = std::make_shared<infer::HttpReply>(std::move(reply));
    std::thread([shared, body = std::move(body)]() mutable {
      shared->Send({202, "text/plain", std::move(body), {{"X-Later", "1"}}});
    }).detach();
    return;
  }
  if (last == 'f') {  // encoded on the server's threads
    return reply.SendFrom([body] { return infer::HttpResponse{200, "text/plain", body, {}}; });
  }
  reply.Send({200, "application/json", std::move(body), {}});
}

infer::HttpServer& Server() {
  static infer::HttpServer* server = [] {
    infer::HttpServerOptions o;
    o.address = "127.0.0.1:0";
    o.threads = 2;
    o.max_body_bytes = 8 << 10;
    o.max_buffered_body_bytes = 16 << 10;
    o.max_header_bytes = 2 << 10;
    o.request_timeout = absl::Seconds(2);
    o.idle_timeout = absl::Seconds(2);
    auto started = infer::HttpServer::Start(o, Answer);
    if (!started.ok()) abort();
    return started->release();
  }();
  return *server;
}

// A connection to the server from the next of 65,024 loopback addresses
// (127.0.1.1 to 127.0.254.255). The client shuts its side first, so each
// connection leaves a TIME_WAIT entry for a minute; from one address the
// 28,000 ephemeral ports ran out after about 15 s of fuzzing and connect
// failed. IP_BIND_ADDRESS_NO_PORT lets connect pick the port per address.
int Connect(int port) {
  static uint32_t next = 0;
  const uint32_t n = next++ % (254 * 256);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) abort();
  const int one = 1;
  setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
  sockaddr_in from{};
  from.sin_family = AF_INET;
  from.sin_addr.s_addr = htonl((127u << 24) | ((1 + n / 256) << 8) | (n % 256));
  if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0) abort();
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    // A signal (libFuzzer's timer) interrupted it: the connection goes on
    // being made; wait for it rather than connect again.
    int error = errno;
    if (error == EINTR) {
      pollfd p{fd, POLLOUT, 0};
      while (poll(&p, 1, 10'000) < 0 && errno == EINTR) {
      }
      socklen_t len = sizeof(error);
      if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) error = errno;
      if ((p.revents & POLLOUT) == 0 && error == 0) error = ETIMEDOUT;
    }
    if (error != 0) {
      std::fprintf(stderr, "connect from 127.0.%u.%u failed: %s\n", 1 + n / 256, n % 256,
                   std::strerror(error));
      abort();
    }
  }
  return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  infer::HttpServer& server = Server();
  const int fd = Connect(server.port());
  // Send while reading: the server may answer (and stop reading) early.
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  std::thread writer([fd, data, size] {
    size_t sent = 0;
    while (sent < size) {
      const ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    shutdown(fd, SHUT_WR);
  });
  char buf[16384];
  while (true) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0) break;  // the server closed: every request answered or refused
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ECONNRESET) break;
      __builtin_trap();  // no answer and no close within 10 s: the server hangs
    }
  }
  writer.join();
  close(fd);
  // Every request handed to the handler is answered before the connection
  // closes (a reply dropped is answered 500), except one the handler
  // answers later from its thread, and the session gives its body budget
  // back when it ends, just after the close: wait a moment for both.
  auto settled = [&] { return server.InFlight() == 0 && server.BufferedBodyBytes() == 0; };
  for (int i = 0; i < 1000 && !settled(); ++i) absl::SleepFor(absl::Milliseconds(1));
  if (!settled()) __builtin_trap();
  return 0;
}
