// Internal to the HTTP transport (http_server.cc, http_session.h): the
// server's shared state, what an HttpReply holds, and the connection
// interface the server and replies see. Not for front ends.
#ifndef INFER_SERVER_HTTP_HTTP_SERVER_CORE_H_
#define INFER_SERVER_HTTP_HTTP_SERVER_CORE_H_

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/http/http_server.h"

namespace infer {

namespace http_internal {

inline std::chrono::steady_clock::duration ToChrono(absl::Duration d) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      absl::ToChronoNanoseconds(d));
}

inline std::string ErrorJson(absl::string_view message) {
  // The few transport errors are fixed texts plus a number; no escaping needed
  // beyond quotes, which they do not contain.
  return absl::StrCat("{\"error\":\"", message, "\"}");
}

// One connection, as the server (drain) and replies (answers) see it.
class SessionBase {
 public:
  virtual ~SessionBase() = default;
  // Any thread: writes the handler's answer on the session's strand.
  virtual void Answer(std::function<HttpResponse()> make) = 0;
  // Closes the connection if it waits for a request.
  virtual void CloseIfIdle() = 0;
};

}  // namespace http_internal

struct HttpServer::Core : std::enable_shared_from_this<HttpServer::Core> {
  HttpServerOptions options;
  HttpHandler handler;
  // TLS on every connection when set (HttpServerOptions::tls_cert_file).
  std::shared_ptr<boost::asio::ssl::context> tls;
  int port = 0;
  std::atomic<bool> stopping{false};
  std::atomic<int64_t> connections{0};
  std::atomic<int64_t> in_flight{0};
  std::atomic<int64_t> buffered{0};  // body bytes reserved by connections
  std::mutex mu;
  std::condition_variable idle_cv;
  // Guarded by mu.
  std::map<http_internal::SessionBase*, std::weak_ptr<http_internal::SessionBase>> sessions;
  std::vector<std::thread> threads;
  // Declared last: destroyed first, with the handlers (and sessions) it holds,
  // while the members above still exist.
  boost::asio::io_context ioc;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  std::optional<boost::asio::ip::tcp::acceptor> acceptor;

  // Reserves `bytes` of the body budget; false when it would pass it.
  bool Reserve(int64_t bytes) {
    int64_t now = buffered.load(std::memory_order_relaxed);
    do {
      if (now + bytes > options.max_buffered_body_bytes) return false;
    } while (!buffered.compare_exchange_weak(now, now + bytes, std::memory_order_relaxed));
    return true;
  }
  void Finished() {
    if (in_flight.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> lock(mu);
      idle_cv.notify_all();
    }
  }
};

// What a reply holds: the session to answer on, and the core, whose
// io_context the answer is posted to, so that both outlive a reply sent
// after the server is gone (the answer is then dropped with the io_context).
class HttpReply::Sink {
 public:
  std::shared_ptr<HttpServer::Core> core;  // declared first: destroyed last
  std::shared_ptr<http_internal::SessionBase> session;
};

}  // namespace infer

#endif  // INFER_SERVER_HTTP_HTTP_SERVER_CORE_H_
