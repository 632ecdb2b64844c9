#include "server/http/http_server.h"

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/quote.h"
#include "server/http/http_server_core.h"
#include "server/http/http_session.h"
#include "server/http/http_tls.h"

namespace infer {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

using http_internal::ErrorJson;
using http_internal::Session;
using http_internal::ToChrono;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

void Accept(HttpServer::Core* core) {
  core->acceptor->async_accept(
      net::make_strand(core->ioc), [core](beast::error_code ec, tcp::socket socket) {
        if (core->stopping.load() || ec == net::error::operation_aborted) return;
        if (!ec) {
          if (core->connections.load() >= core->options.max_connections) {
            beast::error_code ignored;
            socket.close(ignored);  // over the connection limit
          } else if (core->tls != nullptr) {
            std::make_shared<Session<TlsStream>>(core, std::move(socket))->Start();
          } else {
            std::make_shared<Session<beast::tcp_stream>>(core, std::move(socket))->Start();
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
  if (!options.tls_cert_file.empty() || !options.tls_client_ca_file.empty()) {
    auto tls = MakeServerTlsContext(options.tls_cert_file, options.tls_key_file,
                                    options.tls_client_ca_file);
    if (!tls.ok()) return tls.status();
    core->tls = *std::move(tls);
  }
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
  std::vector<std::shared_ptr<http_internal::SessionBase>> open;
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
