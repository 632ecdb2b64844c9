// Internal to the HTTP transport (http_server.cc): one connection, over
// plain TCP or TLS (Stream: beast::tcp_stream or
// beast::ssl_stream<beast::tcp_stream>), reading requests one at a time
// within the limits http_server.h describes and writing the handler's
// answers. Everything runs on the connection's strand.
#ifndef INFER_SERVER_HTTP_HTTP_SESSION_H_
#define INFER_SERVER_HTTP_HTTP_SESSION_H_

#include <array>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <limits>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "server/http/http_server_core.h"

namespace infer::http_internal {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

template <class Stream>
class Session : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
 public:
  // A TLS connection's handshake runs first (Start), within request_timeout.
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  Session(HttpServer::Core* core, tcp::socket socket)
      : core_(core), stream_(MakeStream(core, std::move(socket))) {
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
      core_->sessions[this] = this->weak_from_this();
    }
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      if constexpr (kTls) {
        // No request is read before the handshake; a client that does not
        // finish it within the request timeout is cut off like a slow one.
        self->Lowest().expires_after(ToChrono(self->core_->options.request_timeout));
        self->stream_.async_handshake(net::ssl::stream_base::server, [self](beast::error_code ec) {
          if (ec) return self->Close();
          self->ReadHeader();
        });
      } else {
        self->ReadHeader();
      }
    });
  }

  // On the session's strand: closes the connection if it waits for a request.
  void CloseIfIdle() override {
    net::post(stream_.get_executor(), [self = this->shared_from_this()] {
      if (self->idle_) self->Lowest().cancel();
    });
  }

  // Any thread: writes the handler's answer on the session's strand.
  void Answer(std::function<HttpResponse()> make) override {
    net::post(stream_.get_executor(), [self = this->shared_from_this(), make = std::move(make)] {
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
    Lowest().expires_after(
        ToChrono(answered_ == 0 ? core_->options.request_timeout : core_->options.idle_timeout));
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](beast::error_code ec, std::size_t n) {
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
    Lowest().expires_after(ToChrono(core_->options.request_timeout));
    const auto& expect = parser_->get()[http::field::expect];
    if (beast::iequals(expect, "100-continue")) {
      continue_ = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
      http::async_write(stream_, *continue_,
                        [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                          if (ec) return self->Close();
                          self->ReadBody();
                        });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, std::size_t n) {
                       self->OnBody(ec, n);
                     });
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
    cors_origin_ = CorsOrigin(request.Header("origin"));
    if (!cors_origin_.empty() && request.method == "OPTIONS" &&
        !request.Header("access-control-request-method").empty()) {
      // A browser's preflight: answered here, before any route (it carries
      // no credentials, so the API key does not apply).
      return Write({204,
                    "text/plain",
                    "",
                    {{"Access-Control-Allow-Methods", "GET, POST"},
                     {"Access-Control-Allow-Headers", "content-type, authorization"},
                     {"Access-Control-Max-Age", "600"}}},
                   /*close=*/false, /*counted=*/false);
    }
    core_->in_flight.fetch_add(1);
    auto sink = std::make_shared<HttpReply::Sink>();
    sink->core = core_->shared_from_this();
    sink->session = this->shared_from_this();
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
    if (!cors_origin_.empty()) {
      response_->set(http::field::access_control_allow_origin, cors_origin_);
      response_->set(http::field::vary, "Origin");
      cors_origin_.clear();
    }
    response_->keep_alive(keep_alive_);
    if (head_ && !close) {
      response_->content_length(r.body.size());  // HEAD: the length, no body
    } else {
      response_->body() = std::move(r.body);
      response_->prepare_payload();
    }
    Lowest().expires_after(ToChrono(core_->options.request_timeout));
    http::async_write(
        stream_, *response_,
        [self = this->shared_from_this(), close, counted](beast::error_code ec, std::size_t) {
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
    Lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return Close();
    lingered_ = 0;
    Lowest().expires_after(std::chrono::seconds(1));
    DrainSome();
  }
  void DrainSome() {
    stream_.async_read_some(net::buffer(discard_),
                            [self = this->shared_from_this()](beast::error_code ec, std::size_t n) {
                              self->lingered_ += n;
                              if (ec || self->lingered_ > (1 << 20)) return self->Close();
                              self->DrainSome();
                            });
  }

  void Close() {
    beast::error_code ec;
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
    Lowest().socket().close(ec);
  }

  // What Access-Control-Allow-Origin says to a request from `origin`:
  // "*" when any origin is allowed, the origin itself when it is listed,
  // else empty (no CORS headers).
  std::string CorsOrigin(absl::string_view origin) const {
    if (origin.empty()) return "";
    for (const std::string& allowed : core_->options.cors_allow_origins) {
      if (allowed == "*") return "*";
      if (allowed == origin) return std::string(origin);
    }
    return "";
  }

  void ReleaseBody() {
    if (reserved_ > 0) core_->buffered.fetch_sub(reserved_);
    reserved_ = 0;
  }

  static Stream MakeStream(HttpServer::Core* core, tcp::socket socket) {
    if constexpr (kTls) {
      return Stream(std::move(socket), *core->tls);
    } else {
      return Stream(std::move(socket));
    }
  }
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  HttpServer::Core* const core_;
  Stream stream_;
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
  bool idle_ = false;        // waiting for a request; read and written on the strand only
  std::string cors_origin_;  // of the request being answered (CorsOrigin)
};

}  // namespace infer::http_internal

#endif  // INFER_SERVER_HTTP_HTTP_SESSION_H_
