#include "server/http/http_server.h"

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/quote.h"

namespace infer {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

class Session;

std::chrono::steady_clock::duration ToChrono(absl::Duration d) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      absl::ToChronoNanoseconds(d));
}

std::string ErrorJson(absl::string_view message) {
  // The few transport errors are fixed texts plus a number; no escaping needed
  // beyond quotes, which they do not contain.
  return absl::StrCat("{\"error\":\"", message, "\"}");
}

}  // namespace

struct HttpServer::Core : std::enable_shared_from_this<HttpServer::Core> {
  HttpServerOptions options;
  HttpHandler handler;
  int port = 0;
  std::atomic<bool> stopping{false};
  std::atomic<int64_t> connections{0};
  std::atomic<int64_t> in_flight{0};
  std::atomic<int64_t> buffered{0};  // body bytes reserved by connections
  std::mutex mu;
  std::condition_variable idle_cv;
  std::map<Session*, std::weak_ptr<Session>> sessions;  // guarded by mu
  std::vector<std::thread> threads;
  // Declared last: destroyed first, with the handlers (and sessions) it holds,
  // while the members above still exist.
  net::io_context ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::optional<tcp::acceptor> acceptor;

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
  std::shared_ptr<Session> session;
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(HttpServer::Core* core, tcp::socket socket) : core_(core), stream_(std::move(socket)) {
    core_->connections.fetch_add(1);
  }
  ~Session() {
    ReleaseBody();
    core_->connections.fetch_sub(1);
    std::lock_guard<std::mutex> lock(core_->mu);
    core_->sessions.erase(this);
  }

  void Start() {
    {
      std::lock_guard<std::mutex> lock(core_->mu);
      core_->sessions[this] = weak_from_this();
    }
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->ReadHeader(); });
  }

  // On the session's strand: closes the connection if it waits for a request.
  void CloseIfIdle() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      if (self->idle_) self->stream_.cancel();
    });
  }

  // Any thread: writes the handler's answer on the session's strand.
  void Answer(std::function<HttpResponse()> make) {
    net::post(stream_.get_executor(), [self = shared_from_this(), make = std::move(make)] {
      HttpResponse response;
      try {
        response = make();
      } catch (const std::exception& e) {
        response = {500, "application/json", ErrorJson("internal error while answering")};
      }
      self->Write(std::move(response), /*close=*/false, /*counted=*/true);
    });
  }

 private:
  void ReadHeader() {
    if (core_->stopping.load()) return Close();
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(core_->options.max_header_bytes));
    // No limit while the headers are read: a declared length over the limit
    // is answered 413 in OnHeader (Beast would call it a parse error).
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    idle_ = true;
    stream_.expires_after(
        ToChrono(answered_ == 0 ? core_->options.request_timeout : core_->options.idle_timeout));
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              self->OnHeader(ec, n);
                            });
  }

  void OnHeader(beast::error_code ec, std::size_t bytes) {
    idle_ = false;
    if (ec) return OnReadError(ec, bytes > 0 || buffer_.size() > 0);
    const boost::optional<std::uint64_t> length = parser_->content_length();
    const int64_t limit = core_->options.max_body_bytes;
    if (length && *length > static_cast<std::uint64_t>(limit)) {
      return Refuse(413, absl::StrCat("the request body of ", *length,
                                      " bytes is over the server's limit of ", limit,
                                      " bytes (--max-receive-message-bytes)"));
    }
    // A chunked body's size is unknown: it may use up to the limit.
    const int64_t reserve =
        length ? static_cast<int64_t>(*length) : (parser_->chunked() ? limit : 0);
    if (reserve > 0) {
      if (!core_->Reserve(reserve)) {
        return Refuse(503,
                      "the server holds as many request bodies as it may "
                      "(max_buffered_body_bytes); retry",
                      {{"Retry-After", "1"}});
      }
      reserved_ = reserve;
    }
    parser_->body_limit(static_cast<std::uint64_t>(limit));  // for a chunked body
    stream_.expires_after(ToChrono(core_->options.request_timeout));
    const auto& expect = parser_->get()[http::field::expect];
    if (beast::iequals(expect, "100-continue")) {
      continue_ = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
      http::async_write(stream_, *continue_,
                        [self = shared_from_this()](beast::error_code ec, std::size_t) {
                          if (ec) return self->Close();
                          self->ReadBody();
                        });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, std::size_t n) { self->OnBody(ec, n); });
  }

  void OnBody(beast::error_code ec, std::size_t) {
    if (ec == http::error::body_limit) {
      return Refuse(
          413, absl::StrCat("the request body is over the server's limit of ",
                            core_->options.max_body_bytes, " bytes (--max-receive-message-bytes)"));
    }
    if (ec) return OnReadError(ec, /*partial=*/true);
    http::request<http::string_body> message = parser_->release();
    keep_alive_ = message.keep_alive();
    version_ = message.version();
    head_ = message.method() == http::verb::head;
    HttpRequest request;
    request.method = std::string(message.method_string());
    const absl::string_view target(message.target().data(), message.target().size());
    const size_t q = target.find('?');
    request.path = std::string(target.substr(0, q));
    if (q != absl::string_view::npos) request.query = std::string(target.substr(q + 1));
    for (const auto& field : message) {
      request.headers.emplace_back(absl::AsciiStrToLower(absl::string_view(
                                       field.name_string().data(), field.name_string().size())),
                                   std::string(field.value()));
    }
    request.body = std::move(message.body());
    core_->in_flight.fetch_add(1);
    auto sink = std::make_shared<HttpReply::Sink>();
    sink->core = core_->shared_from_this();
    sink->session = shared_from_this();
    core_->handler(std::move(request), HttpReply(std::move(sink)));
  }

  void OnReadError(beast::error_code ec, bool partial) {
    if (ec == http::error::header_limit) {
      return Refuse(431, absl::StrCat("the request's headers are over the server's limit of ",
                                      core_->options.max_header_bytes, " bytes"));
    }
    if (ec == beast::error::timeout || ec == http::error::end_of_stream || ec == net::error::eof ||
        ec == net::error::operation_aborted || ec == net::error::connection_reset || !partial) {
      return Close();  // gone, idle, or too slow: nobody to answer
    }
    Refuse(400, absl::StrCat("malformed HTTP request (", ec.message(), ")"));
  }

  // Answers an error the transport found and closes the connection after
  // it: the rest of the request was not read.
  void Refuse(int status, absl::string_view message,
              std::vector<std::pair<std::string, std::string>> headers = {}) {
    if (version_ == 0) version_ = 11;
    Write({status, "application/json", ErrorJson(message), std::move(headers)}, /*close=*/true,
          /*counted=*/false);
  }

  void Write(HttpResponse r, bool close, bool counted) {
    ReleaseBody();  // the request is done with its body
    if (close || core_->stopping.load()) keep_alive_ = false;
    response_ = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(r.status), version_ == 10 ? 10 : 11);
    response_->set(http::field::server, "infer");
    response_->set(http::field::content_type, r.content_type);
    for (auto& [name, value] : r.headers) response_->set(name, value);
    response_->keep_alive(keep_alive_);
    if (head_ && !close) {
      response_->content_length(r.body.size());  // HEAD: the length, no body
    } else {
      response_->body() = std::move(r.body);
      response_->prepare_payload();
    }
    stream_.expires_after(ToChrono(core_->options.request_timeout));
    http::async_write(
        stream_, *response_,
        [self = shared_from_this(), close, counted](beast::error_code ec, std::size_t) {
          if (counted) self->core_->Finished();
          self->response_.reset();
          ++self->answered_;
          if (ec) return self->Close();
          if (close) return self->Linger();
          if (!self->keep_alive_) return self->Close();
          self->ReadHeader();
        });
  }

  // After an error answer with the request unread: stop sending, and read
  // and drop what the client still sends for a moment, so that it reads the
  // answer instead of a reset (what nginx calls a lingering close).
  void Linger() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return Close();
    lingered_ = 0;
    stream_.expires_after(std::chrono::seconds(1));
    DrainSome();
  }
  void DrainSome() {
    stream_.async_read_some(net::buffer(discard_),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              self->lingered_ += n;
                              if (ec || self->lingered_ > (1 << 20)) return self->Close();
                              self->DrainSome();
                            });
  }

  void Close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

  void ReleaseBody() {
    if (reserved_ > 0) core_->buffered.fetch_sub(reserved_);
    reserved_ = 0;
  }

  HttpServer::Core* const core_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<http::response<http::empty_body>> continue_;
  std::shared_ptr<http::response<http::string_body>> response_;
  std::array<char, 16384> discard_;
  size_t lingered_ = 0;
  int64_t reserved_ = 0;  // of Core::buffered
  unsigned version_ = 0;
  bool keep_alive_ = false;
  bool head_ = false;
  uint64_t answered_ = 0;
  bool idle_ = false;  // waiting for a request; read and written on the strand only
};

void Accept(HttpServer::Core* core) {
  core->acceptor->async_accept(net::make_strand(core->ioc),
                               [core](beast::error_code ec, tcp::socket socket) {
                                 if (core->stopping.load() || ec == net::error::operation_aborted)
                                   return;
                                 if (!ec) {
                                   if (core->connections.load() >= core->options.max_connections) {
                                     beast::error_code ignored;
                                     socket.close(ignored);  // over the connection limit
                                   } else {
                                     std::make_shared<Session>(core, std::move(socket))->Start();
                                   }
                                 }
                                 Accept(core);
                               });
}

}  // namespace

HttpReply::~HttpReply() {
  if (sink_ != nullptr) {
    Send({500, "application/json", ErrorJson("the request was dropped without an answer")});
  }
}

void HttpReply::Send(HttpResponse response) {
  SendFrom([r = std::move(response)]() mutable { return std::move(r); });
}

void HttpReply::SendFrom(std::function<HttpResponse()> make) {
  if (sink_ == nullptr) return;
  std::shared_ptr<Sink> sink = std::move(sink_);
  sink->session->Answer(std::move(make));
}

absl::string_view HttpRequest::Header(absl::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return value;
  }
  return {};
}

absl::string_view HttpRequest::PathParam(absl::string_view name) const {
  for (const auto& [key, value] : path_params) {
    if (key == name) return value;
  }
  return {};
}

absl::StatusOr<std::pair<std::string, int>> SplitHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "address ", Quote(address), " is not host:port (IPv6 as [addr]:port; port 0 to 65535)"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("address ", Quote(address), " has no host (use 0.0.0.0 or [::] for all)"));
  }
  return std::make_pair(host, port);
}

HttpServer::HttpServer(std::shared_ptr<Core> core) : core_(std::move(core)) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              HttpHandler handler) {
  if (options.threads < 1 || options.max_body_bytes < 1 || options.max_connections < 1 ||
      options.max_header_bytes < 1024 || options.max_header_bytes > (1 << 30) ||
      options.max_buffered_body_bytes < options.max_body_bytes) {
    return absl::InvalidArgumentError(
        "HTTP options: threads, max_body_bytes and max_connections must be positive, "
        "max_header_bytes in [1 KiB, 1 GiB], and max_buffered_body_bytes at least "
        "max_body_bytes");
  }
  auto split = SplitHostPort(options.address);
  if (!split.ok()) return split.status();
  auto core = std::make_shared<Core>();
  core->options = options;
  core->handler = std::move(handler);
  beast::error_code ec;
  tcp::resolver resolver(core->ioc);
  auto endpoints = resolver.resolve(split->first, std::to_string(split->second),
                                    tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot resolve the HTTP address ",
                                                   Quote(options.address), ": ", ec.message()));
  }
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  core->acceptor.emplace(core->ioc);
  auto& acceptor = *core->acceptor;
  if (acceptor.open(endpoint.protocol(), ec); !ec) {
    acceptor.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  }
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for HTTP on ", Quote(options.address), ": ", ec.message()));
  }
  core->port = acceptor.local_endpoint().port();
  core->work.emplace(net::make_work_guard(core->ioc));
  Accept(core.get());
  for (int i = 0; i < options.threads; ++i) {
    core->threads.emplace_back([c = core.get()] { c->ioc.run(); });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(core)));
}

int HttpServer::port() const { return core_->port; }

void HttpServer::StopAccepting() {
  if (core_->stopping.exchange(true)) return;
  net::post(core_->ioc, [c = core_.get()] {
    beast::error_code ec;
    c->acceptor->close(ec);
  });
  std::vector<std::shared_ptr<Session>> open;
  {
    std::lock_guard<std::mutex> lock(core_->mu);
    for (auto& [raw, weak] : core_->sessions) {
      if (auto s = weak.lock()) open.push_back(std::move(s));
    }
  }
  for (auto& s : open) s->CloseIfIdle();
}

bool HttpServer::WaitIdle(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(core_->mu);
  return core_->idle_cv.wait_for(lock, ToChrono(std::max(timeout, absl::ZeroDuration())),
                                 [this] { return core_->in_flight.load() == 0; });
}

int64_t HttpServer::InFlight() const { return core_->in_flight.load(); }

int64_t HttpServer::BufferedBodyBytes() const { return core_->buffered.load(); }

HttpServer::~HttpServer() {
  StopAccepting();
  core_->work.reset();
  core_->ioc.stop();
  for (std::thread& t : core_->threads) t.join();
  // A reply still held elsewhere (an engine callback) keeps the core, and
  // with it the io_context its answer is posted to, until it is dropped.
}

}  // namespace infer
