// Runs build/bin/infer-server as a child process for integration tests: starts
// it on a free loopback port, waits for its "listening on" line, and stops it
// with a signal. Not thread-safe.
#ifndef INFER_TESTS_TESTING_SERVER_PROCESS_H_
#define INFER_TESTS_TESTING_SERVER_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace infer::testing {

class ServerProcess {
 public:
  // Starts `binary` with --grpc-address 127.0.0.1:0 --metrics-address
  // 127.0.0.1:0 --drain-grace-s 0 (a test stops at once unless it tests the
  // grace period) and then `args` (which may override them). Output goes to
  // a log file (see log()).
  static absl::StatusOr<ServerProcess> Start(const std::string& binary,
                                             const std::vector<std::string>& args,
                                             absl::Duration timeout = absl::Seconds(60));
  ServerProcess(ServerProcess&& other) noexcept;
  ServerProcess& operator=(ServerProcess&&) = delete;
  ~ServerProcess();

  int port() const { return port_; }
  // The metrics endpoint's port; 0 when metrics are off.
  int metrics_port() const { return metrics_port_; }
  // The HTTP front end's port; 0 when it is off.
  int http_port() const { return http_port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // The server's output so far.
  std::string log() const;

  // Sends `signal` and waits for exit; returns the exit code (or 128 + the
  // signal that killed it). Kills it after `timeout`.
  absl::StatusOr<int> Stop(int signal, absl::Duration timeout = absl::Seconds(30));

 private:
  ServerProcess(pid_t pid, std::string log_path) : pid_(pid), log_path_(std::move(log_path)) {}

  pid_t pid_ = -1;
  int port_ = 0;
  int metrics_port_ = 0;
  int http_port_ = 0;
  std::string log_path_;
};

}  // namespace infer::testing

#endif  // INFER_TESTS_TESTING_SERVER_PROCESS_H_
