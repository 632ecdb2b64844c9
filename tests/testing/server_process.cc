#include "tests/testing/server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace infer::testing {

absl::StatusOr<ServerProcess> ServerProcess::Start(const std::string& binary,
                                                   const std::vector<std::string>& args,
                                                   absl::Duration timeout) {
  char templ[] = "/tmp/infer_server_log_XXXXXX";
  const int log_fd = mkstemp(templ);
  if (log_fd < 0) return absl::InternalError("mkstemp failed");
  std::vector<std::string> argv = {binary,
                                   "--grpc-address",
                                   "127.0.0.1:0",
                                   "--metrics-address",
                                   "127.0.0.1:0",
                                   "--http-address",
                                   "127.0.0.1:0",
                                   "--drain-grace-s",
                                   "0"};
  argv.insert(argv.end(), args.begin(), args.end());
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    execv(binary.c_str(), cargv.data());
    std::perror("execv");
    _exit(127);
  }
  close(log_fd);
  ServerProcess server(pid, templ);
  const std::string marker = "infer-server listening on 127.0.0.1:";
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    const std::string log = server.log();
    const size_t at = log.find(marker);
    if (at != std::string::npos) {
      const size_t start = at + marker.size();
      const size_t end = log.find('\n', start);
      const size_t digits = log.find_first_not_of("0123456789", start);
      if (end != std::string::npos &&
          absl::SimpleAtoi(log.substr(start, digits - start), &server.port_)) {
        // Logged before the gRPC line when metrics are on (https:// with
        // TLS).
        for (const char* metrics :
             {"metrics at http://127.0.0.1:", "metrics at https://127.0.0.1:"}) {
          if (const size_t m = log.find(metrics); m != std::string::npos) {
            const size_t from = m + std::strlen(metrics);
            absl::SimpleAtoi(log.substr(from, log.find('/', from) - from), &server.metrics_port_);
          }
        }
        // So is the HTTP front end's.
        for (const char* http : {") on http://127.0.0.1:", ") on https://127.0.0.1:"}) {
          if (const size_t h = log.find(http); h != std::string::npos) {
            const size_t from = h + std::strlen(http);
            const size_t digits = log.find_first_not_of("0123456789", from);
            absl::SimpleAtoi(log.substr(from, digits - from), &server.http_port_);
          }
        }
        return server;
      }
    }
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      server.pid_ = -1;
      return absl::InternalError(absl::StrCat("infer-server exited early:\n", log));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("infer-server did not start listening:\n", server.log()));
}

ServerProcess::ServerProcess(ServerProcess&& other) noexcept
    : pid_(other.pid_),
      port_(other.port_),
      metrics_port_(other.metrics_port_),
      log_path_(std::move(other.log_path_)) {
  other.pid_ = -1;
  other.log_path_.clear();
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (!log_path_.empty()) std::remove(log_path_.c_str());
}

std::string ServerProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

absl::StatusOr<int> ServerProcess::Stop(int signal, absl::Duration timeout) {
  if (pid_ <= 0) return absl::FailedPreconditionError("not running");
  kill(pid_, signal);
  const absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (true) {
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (absl::Now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      pid_ = -1;
      return absl::DeadlineExceededError("infer-server did not exit in time; killed");
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  pid_ = -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

}  // namespace infer::testing
