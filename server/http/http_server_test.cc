// The HTTP transport against clients written byte by byte over real
// loopback sockets: the limits (body, headers, buffered bodies,
// connections), slow and malformed clients, keep-alive, IPv6, and the drain.
#include "server/http/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A blocking socket with a receive timeout.
class RawClient {
 public:
  explicit RawClient(int port, bool v6 = false) {
    fd_ = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
    timeval tv{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (v6) {
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      a.sin6_port = htons(static_cast<uint16_t>(port));
      inet_pton(AF_INET6, "::1", &a.sin6_addr);
      connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    } else {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<uint16_t>(port));
      inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
      connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    }
  }
  ~RawClient() { close(fd_); }
  bool connected() const { return connected_; }
  bool Send(const std::string& s) {
    return send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
  }
  // One response: its head and the Content-Length bytes after it. Empty
  // when the server closed (or nothing came within the timeout).
  std::string ReadResponse(bool head = false) {
    while (true) {
      const size_t end = buffer_.find("\r\n\r\n");
      if (end != std::string::npos) {
        size_t length = 0;
        const size_t at = buffer_.find("Content-Length: ");
        if (at != std::string::npos && at < end) length = std::stoul(buffer_.substr(at + 16));
        if (head || absl::StartsWith(buffer_, "HTTP/1.1 100")) length = 0;
        if (buffer_.size() >= end + 4 + length) {
          std::string r = buffer_.substr(0, end + 4 + length);
          buffer_.erase(0, end + 4 + length);
          return r;
        }
      }
      if (!ReadMore()) return "";
    }
  }
  // True when the server closed the connection (within the timeout).
  bool Closed() {
    while (ReadMore()) {
    }
    return closed_;
  }

 private:
  bool ReadMore() {
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) closed_ = true;
    if (n <= 0) return false;
    buffer_.append(buf, static_cast<size_t>(n));
    return true;
  }
  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
  std::string buffer_;
};

std::string Post(const std::string& path, const std::string& body, const std::string& extra = "") {
  return absl::StrCat("POST ", path, " HTTP/1.1\r\nHost: x\r\nContent-Length: ", body.size(),
                      "\r\n", extra, "\r\n", body);
}

class HttpServerTest : public ::testing::Test {
 protected:
  // Echoes the body's size; "/hold" keeps the reply until Release.
  void StartServer(HttpServerOptions options) {
    if (options.address == HttpServerOptions{}.address) options.address = "127.0.0.1:0";
    auto s = HttpServer::Start(options, [this](HttpRequest request, HttpReply reply) {
      calls_.fetch_add(1);
      if (request.path == "/hold") {
        std::lock_guard<std::mutex> lock(mu_);
        held_.push_back(std::move(reply));
        return;
      }
      if (request.path == "/drop") return;  // the reply is destroyed unanswered
      reply.Send({200, "text/plain",
                  absl::StrCat(request.method, " ", request.path, " ", request.body.size())});
    });
    ASSERT_THAT(s, IsOk());
    server_ = *std::move(s);
  }
  void Release() {
    std::vector<HttpReply> held;
    {
      std::lock_guard<std::mutex> lock(mu_);
      held.swap(held_);
    }
    for (HttpReply& r : held) r.Send({200, "text/plain", "released"});
  }
  void WaitHeld(size_t n) {
    for (int i = 0; i < 500; ++i) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (held_.size() >= n) return;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    FAIL() << "the handler did not get " << n << " requests";
  }

  std::unique_ptr<HttpServer> server_;
  std::atomic<int> calls_{0};
  std::mutex mu_;
  std::vector<HttpReply> held_;
};

TEST_F(HttpServerTest, KeepAliveAnswersRequestsInOrderOnOneConnection) {
  StartServer({});
  RawClient c(server_->port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send(Post("/a", "hello") + "GET /b HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string first = c.ReadResponse(), second = c.ReadResponse();
  EXPECT_THAT(first, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(first, HasSubstr("POST /a 5"));
  EXPECT_THAT(second, HasSubstr("GET /b 0"));
  // HEAD: the length of what GET would send, no body.
  ASSERT_TRUE(c.Send("HEAD /c HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string head = c.ReadResponse(/*head=*/true);
  EXPECT_THAT(head, HasSubstr("Content-Length: 9"));  // "HEAD /c 0"
  EXPECT_TRUE(absl::EndsWith(head, "\r\n\r\n"));
  ASSERT_TRUE(c.Send("GET /d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  EXPECT_THAT(c.ReadResponse(), HasSubstr("GET /d 0"));
  EXPECT_TRUE(c.Closed());
}

TEST_F(HttpServerTest, CorsHeadersForAllowedOriginsAndPreflightsAnsweredHere) {
  HttpServerOptions options;
  options.cors_allow_origins = {"https://app.example"};
  StartServer(options);
  RawClient c(server_->port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send(Post("/a", "x", "Origin: https://app.example\r\n")));
  std::string r = c.ReadResponse();
  EXPECT_THAT(r, HasSubstr("Access-Control-Allow-Origin: https://app.example"));
  EXPECT_THAT(r, HasSubstr("Vary: Origin"));
  // Another origin, or none: served, without CORS headers.
  ASSERT_TRUE(c.Send(Post("/a", "x", "Origin: https://evil.example\r\n") + Post("/b", "y")));
  for (int i = 0; i < 2; ++i) {
    r = c.ReadResponse();
    EXPECT_THAT(r, HasSubstr("200 OK"));
    EXPECT_THAT(r, ::testing::Not(HasSubstr("Access-Control")));
  }
  // A preflight never reaches the handler.
  const int before = calls_.load();
  ASSERT_TRUE(
      c.Send("OPTIONS /v1/embeddings HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example"
             "\r\nAccess-Control-Request-Method: POST\r\n\r\n"));
  r = c.ReadResponse();
  EXPECT_THAT(r, StartsWith("HTTP/1.1 204"));
  EXPECT_THAT(r, HasSubstr("Access-Control-Allow-Methods: GET, POST"));
  EXPECT_THAT(r, HasSubstr("Access-Control-Allow-Headers: content-type, authorization"));
  EXPECT_EQ(calls_.load(), before);
  server_.reset();
  options.cors_allow_origins = {"*"};
  StartServer(options);
  RawClient any(server_->port());
  ASSERT_TRUE(any.Send(Post("/a", "x", "Origin: https://anything.example\r\n")));
  EXPECT_THAT(any.ReadResponse(), HasSubstr("Access-Control-Allow-Origin: *"));
}

TEST_F(HttpServerTest, ServesIpv6AndBothFamiliesOnTheWildcard) {
  {
    // Is there an IPv6 loopback at all?
    const int fd = socket(AF_INET6, SOCK_STREAM, 0);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    inet_pton(AF_INET6, "::1", &a.sin6_addr);
    const bool v6 = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    if (fd >= 0) close(fd);
    if (!v6) GTEST_SKIP() << "this machine has no IPv6 loopback (::1)";
  }
  StartServer({.address = "[::]:0"});
  RawClient v6(server_->port(), /*v6=*/true), v4(server_->port());
  ASSERT_TRUE(v6.connected());
  ASSERT_TRUE(v4.connected());
  ASSERT_TRUE(v6.Send("GET /six HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(v4.Send("GET /four HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_THAT(v6.ReadResponse(), HasSubstr("GET /six 0"));
  EXPECT_THAT(v4.ReadResponse(), HasSubstr("GET /four 0"));
}

TEST_F(HttpServerTest, ABodyDeclaredOverTheLimitIsRefusedBeforeItIsSent) {
  StartServer({.max_body_bytes = 1000, .max_buffered_body_bytes = 4000});
  RawClient c(server_->port());
  // The headers alone: the 413 comes without a byte of the body.
  ASSERT_TRUE(c.Send("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5000000000\r\n\r\n"));
  const std::string r = c.ReadResponse();
  EXPECT_THAT(r, StartsWith("HTTP/1.1 413"));
  EXPECT_THAT(r, HasSubstr("5000000000 bytes is over the server's limit of 1000 bytes"));
  EXPECT_THAT(r, HasSubstr("Connection: close"));
  EXPECT_TRUE(c.Closed());
  // With Expect: 100-continue, 413 instead of 100.
  RawClient e(server_->port());
  ASSERT_TRUE(e.Send(
      "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\nExpect: 100-continue\r\n\r\n"));
  EXPECT_THAT(e.ReadResponse(), StartsWith("HTTP/1.1 413"));
  // Within the limit, 100 then the answer.
  RawClient ok(server_->port());
  ASSERT_TRUE(
      ok.Send("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n"));
  EXPECT_THAT(ok.ReadResponse(), StartsWith("HTTP/1.1 100"));
  ASSERT_TRUE(ok.Send("abc"));
  EXPECT_THAT(ok.ReadResponse(), HasSubstr("POST /x 3"));
  EXPECT_EQ(calls_.load(), 1);
}

TEST_F(HttpServerTest, AChunkedBodyIsCutOffWhenItPassesTheLimit) {
  StartServer({.max_body_bytes = 1000, .max_buffered_body_bytes = 4000});
  RawClient c(server_->port());
  ASSERT_TRUE(c.Send("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
  const std::string chunk = absl::StrCat("200\r\n", std::string(0x200, 'a'), "\r\n");
  for (int i = 0; i < 3; ++i) c.Send(chunk);  // 1536 bytes
  const std::string r = c.ReadResponse();
  EXPECT_THAT(r, StartsWith("HTTP/1.1 413"));
  EXPECT_THAT(r, HasSubstr("over the server's limit of 1000 bytes"));
  // A chunked body within the limit is read whole.
  RawClient ok(server_->port());
  ASSERT_TRUE(ok.Send("POST /y HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk +
                      "0\r\n\r\n"));
  EXPECT_THAT(ok.ReadResponse(), HasSubstr("POST /y 512"));
  EXPECT_EQ(calls_.load(), 1);
}

TEST_F(HttpServerTest, OversizedHeadersAndMalformedRequestsAreRefused) {
  StartServer({.max_header_bytes = 2048});
  RawClient big(server_->port());
  ASSERT_TRUE(big.Send("GET / HTTP/1.1\r\nX-Big: " + std::string(100000, 'a') + "\r\n\r\n"));
  const std::string r = big.ReadResponse();
  EXPECT_THAT(r, StartsWith("HTTP/1.1 431"));
  EXPECT_THAT(r, HasSubstr("limit of 2048 bytes"));
  RawClient bad(server_->port());
  ASSERT_TRUE(bad.Send("NOT HTTP AT ALL\r\n\r\n"));
  EXPECT_THAT(bad.ReadResponse(), StartsWith("HTTP/1.1 400"));
  EXPECT_TRUE(bad.Closed());
  RawClient length(server_->port());
  ASSERT_TRUE(length.Send("POST / HTTP/1.1\r\nContent-Length: -4\r\n\r\n"));
  EXPECT_THAT(length.ReadResponse(), StartsWith("HTTP/1.1 400"));
  EXPECT_EQ(calls_.load(), 0);
  // The server goes on serving.
  RawClient good(server_->port());
  ASSERT_TRUE(good.Send("GET /fine HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_THAT(good.ReadResponse(), HasSubstr("GET /fine 0"));
}

TEST_F(HttpServerTest, ATricklingClientIsCutOffAndOthersAreServedMeanwhile) {
  StartServer({.request_timeout = absl::Seconds(1), .idle_timeout = absl::Seconds(1)});
  RawClient slow(server_->port());
  ASSERT_TRUE(slow.Send("POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"));
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    for (int i = 0; i < 40 && !stop.load(); ++i) {
      slow.Send("a");
      absl::SleepFor(absl::Milliseconds(100));
    }
  });
  RawClient other(server_->port());
  ASSERT_TRUE(other.Send("GET /other HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_THAT(other.ReadResponse(), HasSubstr("GET /other 0"));
  const absl::Time t0 = absl::Now();
  EXPECT_TRUE(slow.Closed());
  EXPECT_LT(absl::Now() - t0, absl::Seconds(3));
  stop.store(true);
  trickle.join();
  // An idle keep-alive connection is closed after idle_timeout.
  RawClient idle(server_->port());
  EXPECT_TRUE(idle.Closed());
  EXPECT_EQ(calls_.load(), 1);
}

TEST_F(HttpServerTest, BodiesHeldPastTheBudgetGet503BeforeTheyAreRead) {
  StartServer({.max_body_bytes = 1000, .max_buffered_body_bytes = 2000});
  RawClient a(server_->port()), b(server_->port()), c(server_->port());
  ASSERT_TRUE(a.Send(Post("/hold", std::string(1000, 'a'))));
  ASSERT_TRUE(b.Send(Post("/hold", std::string(1000, 'b'))));
  WaitHeld(2);
  EXPECT_EQ(server_->InFlight(), 2);
  ASSERT_TRUE(c.Send("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n"));
  const std::string r = c.ReadResponse();
  EXPECT_THAT(r, StartsWith("HTTP/1.1 503"));
  EXPECT_THAT(r, HasSubstr("Retry-After: 1"));
  // A request without a body needs no budget.
  RawClient d(server_->port());
  ASSERT_TRUE(d.Send("GET /free HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_THAT(d.ReadResponse(), HasSubstr("GET /free 0"));
  Release();
  EXPECT_THAT(a.ReadResponse(), HasSubstr("released"));
  EXPECT_THAT(b.ReadResponse(), HasSubstr("released"));
  EXPECT_TRUE(server_->WaitIdle(absl::Seconds(5)));
  // The budget is back.
  RawClient e(server_->port());
  ASSERT_TRUE(e.Send(Post("/x", std::string(1000, 'e'))));
  EXPECT_THAT(e.ReadResponse(), HasSubstr("POST /x 1000"));
}

TEST_F(HttpServerTest, ConnectionsPastTheLimitAreClosedAtOnce) {
  StartServer({.max_connections = 2});
  RawClient a(server_->port()), b(server_->port());
  ASSERT_TRUE(a.Send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(b.Send("GET /b HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_THAT(a.ReadResponse(), HasSubstr("GET /a 0"));
  EXPECT_THAT(b.ReadResponse(), HasSubstr("GET /b 0"));
  RawClient c(server_->port());
  EXPECT_TRUE(c.Closed());
  // The two open ones go on.
  ASSERT_TRUE(a.Send("GET /again HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_THAT(a.ReadResponse(), HasSubstr("GET /again 0"));
}

TEST_F(HttpServerTest, StopAcceptingAnswersInFlightWithCloseAndRefusesNewConnections) {
  StartServer({});
  RawClient busy(server_->port()), idle(server_->port());
  ASSERT_TRUE(idle.Send("GET /first HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_THAT(idle.ReadResponse(), HasSubstr("GET /first 0"));  // now idle, kept alive
  ASSERT_TRUE(busy.Send(Post("/hold", "x")));
  WaitHeld(1);
  server_->StopAccepting();
  EXPECT_TRUE(idle.Closed());
  EXPECT_FALSE(server_->WaitIdle(absl::Milliseconds(100)));
  RawClient late(server_->port());
  EXPECT_FALSE(late.connected() && late.Send("GET / HTTP/1.1\r\n\r\n") && !late.Closed());
  Release();
  const std::string r = busy.ReadResponse();
  EXPECT_THAT(r, HasSubstr("released"));
  EXPECT_THAT(r, HasSubstr("Connection: close"));
  EXPECT_TRUE(server_->WaitIdle(absl::Seconds(5)));
  EXPECT_TRUE(busy.Closed());
}

TEST_F(HttpServerTest, ADroppedReplyAnswers500AndALateOneAfterTheServerIsGoneIsDropped) {
  StartServer({});
  RawClient c(server_->port());
  ASSERT_TRUE(c.Send("GET /drop HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string r = c.ReadResponse();
  EXPECT_THAT(r, StartsWith("HTTP/1.1 500"));
  EXPECT_THAT(r, HasSubstr("dropped without an answer"));
  RawClient held(server_->port());
  ASSERT_TRUE(held.Send("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"));
  WaitHeld(1);
  server_.reset();  // the reply outlives the server
  Release();        // sent to nobody; nothing breaks
}

TEST(SplitHostPortTest, ParsesEachFormAndNamesWhatIsWrong) {
  EXPECT_EQ(*SplitHostPort("127.0.0.1:8000"), std::make_pair(std::string("127.0.0.1"), 8000));
  EXPECT_EQ(*SplitHostPort("[::1]:0"), std::make_pair(std::string("::1"), 0));
  EXPECT_EQ(*SplitHostPort("localhost:80"), std::make_pair(std::string("localhost"), 80));
  EXPECT_THAT(SplitHostPort("8000"),
              ::infer::testing::StatusIs(absl::StatusCode::kInvalidArgument, "is not host:port"));
  EXPECT_THAT(SplitHostPort("h:70000"),
              ::infer::testing::StatusIs(absl::StatusCode::kInvalidArgument, "is not host:port"));
  EXPECT_THAT(SplitHostPort(":80"),
              ::infer::testing::StatusIs(absl::StatusCode::kInvalidArgument, "has no host"));
}

}  // namespace
}  // namespace infer
