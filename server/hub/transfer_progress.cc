#include "server/hub/transfer_progress.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_format.h"

namespace infer::hub {

TransferProgress::TransferProgress(std::string what, int64_t total_bytes,
                                   std::chrono::milliseconds log_every)
    : what_(std::move(what)),
      total_(total_bytes),
      terminal_(isatty(STDERR_FILENO) == 1),
      log_every_(log_every),
      start_(Clock::now()),
      last_report_(start_) {}

std::string TransferProgress::Bytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes < 1000 * 1000) return absl::StrFormat("%.1f kB", b / 1e3);
  if (bytes < int64_t{1000} * 1000 * 1000) return absl::StrFormat("%.1f MB", b / 1e6);
  return absl::StrFormat("%.2f GB", b / 1e9);
}

void TransferProgress::StartFile(const std::string& path, int64_t already) {
  file_ = path;
  done_ += already;
  if (!terminal_ && already > 0) {
    spdlog::info("downloading {}: resuming {} after {}", what_, path, Bytes(already));
  }
}

void TransferProgress::Add(int64_t bytes) {
  done_ += bytes;
  fetched_ += bytes;
  Report(false);
}

void TransferProgress::EndFile() { Report(false); }

void TransferProgress::BreakLine() {
  if (terminal_ && drawn_) {
    std::fputc('\n', stderr);
    drawn_ = false;
  }
}

void TransferProgress::Report(bool force) {
  const Clock::time_point now = Clock::now();
  const auto since = now - last_report_;
  if (!force && since < (terminal_ ? std::chrono::milliseconds(200) : log_every_)) return;
  last_report_ = now;
  const double seconds = std::chrono::duration<double>(now - start_).count();
  const int64_t rate = seconds > 0 ? static_cast<int64_t>(fetched_ / seconds) : 0;
  const int percent =
      total_ > 0 ? static_cast<int>(std::min<int64_t>(100, done_ * 100 / total_)) : 100;
  if (terminal_) {
    constexpr int kWidth = 30;
    const int filled = percent * kWidth / 100;
    std::fprintf(stderr, "\r%s [%s%s] %3d%% %s of %s, %s/s  %-40.40s", what_.c_str(),
                 std::string(filled, '#').c_str(), std::string(kWidth - filled, '.').c_str(),
                 percent, Bytes(done_).c_str(), Bytes(total_).c_str(), Bytes(rate).c_str(),
                 file_.c_str());
    std::fflush(stderr);
    drawn_ = true;
  } else {
    spdlog::info("downloading {}: {} of {} ({}%), {}/s; now {}", what_, Bytes(done_), Bytes(total_),
                 percent, Bytes(rate), file_);
  }
}

void TransferProgress::Finish(int files) {
  if (terminal_ && drawn_) {
    Report(true);
    std::fputc('\n', stderr);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  spdlog::info("downloaded {}: {} files, {} in {:.1f} s ({}/s)", what_, files, Bytes(fetched_),
               seconds, Bytes(seconds > 0 ? static_cast<int64_t>(fetched_ / seconds) : 0));
}

}  // namespace infer::hub
