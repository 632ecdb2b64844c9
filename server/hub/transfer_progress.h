// What the person waiting for a model's download sees: on a terminal
// (standard error is a TTY) a progress bar redrawn in place; otherwise (a
// container's log, a journal) a log line every few seconds with the file,
// the bytes done of the total and the rate. Both end with one line saying
// what was downloaded, how much, and how fast.
//
// Not thread-safe: one download reports to one TransferProgress.
#ifndef INFER_SERVER_HUB_TRANSFER_PROGRESS_H_
#define INFER_SERVER_HUB_TRANSFER_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <string>

namespace infer::hub {

class TransferProgress {
 public:
  // `what`: the repository; `total_bytes`: of every file to download.
  // `log_every`: between two log lines when there is no terminal.
  TransferProgress(std::string what, int64_t total_bytes,
                   std::chrono::milliseconds log_every = std::chrono::seconds(5));
  // A file starts (`already`: bytes a resumed download had before).
  void StartFile(const std::string& path, int64_t already);
  // `bytes` more were written (since the last call).
  void Add(int64_t bytes);
  // The file is whole (or given up); its bytes stay counted.
  void EndFile();
  // Before a log line: ends the bar's line on a terminal, so that the log
  // line starts on a line of its own (the bar is drawn again on the next
  // report).
  void BreakLine();
  // The closing log line.
  void Finish(int files);

  // "1.5 MB", "438.0 MB", "2.1 GB".
  static std::string Bytes(int64_t bytes);

 private:
  void Report(bool force);

  using Clock = std::chrono::steady_clock;
  std::string what_;
  std::string file_;
  int64_t total_;
  int64_t done_ = 0;     // counted toward total_, resumed bytes included
  int64_t fetched_ = 0;  // over the network in this run (for the rate)
  bool terminal_;
  std::chrono::milliseconds log_every_;
  Clock::time_point start_;
  Clock::time_point last_report_;
  bool drawn_ = false;
};

}  // namespace infer::hub

#endif  // INFER_SERVER_HUB_TRANSFER_PROGRESS_H_
